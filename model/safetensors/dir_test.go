package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func shardTensors() []Tensor {
	var ts []Tensor
	for i := 0; i < 5; i++ {
		v := make([]float32, 10)
		for k := range v {
			v[k] = float32(i*16 + k) // exact in bf16
		}
		ts = append(ts, Tensor{Name: fmt.Sprintf("t%d", i), DType: BF16, Shape: []int{2, 5}, F32: v})
	}
	return ts
}

func TestWriteDirShardsAndIndex(t *testing.T) {
	dir := t.TempDir()
	// 20 bytes per tensor, 45 per shard: shards of 2, 2 and 1 tensors.
	files, err := WriteDir(dir, shardTensors(), map[string]string{"format": "pt"}, 45)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ShardName(1, 3), ShardName(2, 3), ShardName(3, 3), IndexFile}
	if !reflect.DeepEqual(files, want) || want[0] != "model-00001-of-00003.safetensors" {
		t.Fatalf("files %v, want %v", files, want)
	}
	raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var index struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	if index.Metadata["total_size"] != 100 {
		t.Errorf("total_size %d, want 100 (tensor bytes only)", index.Metadata["total_size"])
	}
	if index.WeightMap["t1"] != want[0] || index.WeightMap["t2"] != want[1] || index.WeightMap["t4"] != want[2] {
		t.Errorf("weight_map %v", index.WeightMap)
	}
	if !strings.HasPrefix(string(raw), "{\n  \"metadata\": {\n    \"total_size\": 100\n  },\n  \"weight_map\": {\n    \"t0\": ") {
		t.Errorf("index not in transformers' indent-2 sorted form:\n%s", raw)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Files) != 3 || !reflect.DeepEqual(d.Names(), []string{"t0", "t1", "t2", "t3", "t4"}) {
		t.Fatalf("%d files, names %v", len(d.Files), d.Names())
	}
	got := make([]float32, 10)
	if err := d.ReadF32("t3", got); err != nil || got[7] != 55 {
		t.Errorf("t3 = %v, %v", got, err)
	}
	if f, _ := d.FileOf("t4"); filepath.Base(f.Path) != want[2] {
		t.Errorf("t4 in %s", f.Path)
	}
	if f, _ := d.FileOf("t0"); f.Metadata()["format"] != "pt" {
		t.Errorf("shard metadata %v", f.Metadata())
	}
	// Everything fits: one model.safetensors, no index.
	one := t.TempDir()
	if files, err := WriteDir(one, shardTensors(), nil, 5e9); err != nil || !reflect.DeepEqual(files, []string{SingleFile}) {
		t.Fatalf("single: %v %v", files, err)
	}
	if _, err := os.Stat(filepath.Join(one, IndexFile)); err == nil {
		t.Error("index written for a single file")
	}
}

func TestOpenDirRejectsBadIndex(t *testing.T) {
	make3 := func(t *testing.T) string {
		dir := t.TempDir()
		if _, err := WriteDir(dir, shardTensors(), nil, 45); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	setIndex := func(t *testing.T, dir string, edit func(wm map[string]string)) {
		var index map[string]any
		raw, _ := os.ReadFile(filepath.Join(dir, IndexFile))
		json.Unmarshal(raw, &index)
		wm := map[string]string{}
		for k, v := range index["weight_map"].(map[string]any) {
			wm[k] = v.(string)
		}
		edit(wm)
		index["weight_map"] = wm
		raw, _ = json.Marshal(index)
		os.WriteFile(filepath.Join(dir, IndexFile), raw, 0o644)
	}
	cases := []struct {
		name, tensor, inMsg string
		kind                error
		edit                func(t *testing.T, dir string)
	}{
		{"missing shard", "t4", "is missing", ErrIndex, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ShardName(3, 3)))
		}},
		{"wrong shard", "t0", "does not hold it", ErrIndex, func(t *testing.T, dir string) {
			setIndex(t, dir, func(wm map[string]string) { wm["t0"] = ShardName(2, 3) })
		}},
		{"unlisted tensor", "t1", "does not map", ErrIndex, func(t *testing.T, dir string) {
			setIndex(t, dir, func(wm map[string]string) { delete(wm, "t1") })
		}},
		{"path escape", "t0", "not a file in the folder", ErrIndex, func(t *testing.T, dir string) {
			setIndex(t, dir, func(wm map[string]string) { wm["t0"] = "../" + ShardName(1, 3) })
		}},
		{"duplicate", "t0", "twice", ErrDuplicate, func(t *testing.T, dir string) {
			raw := `{"metadata":{},"weight_map":{"t0":"` + ShardName(1, 3) + `","t0":"` + ShardName(1, 3) + `"}}`
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(raw), 0o644)
		}},
		{"corrupt shard", "", "file length", ErrIncompleteBuffer, func(t *testing.T, dir string) {
			p := filepath.Join(dir, ShardName(2, 3))
			raw, _ := os.ReadFile(p)
			os.WriteFile(p, raw[:len(raw)-1], 0o644)
		}},
		{"no weight_map", "", "weight_map", ErrIndex, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"metadata":{}}`), 0o644)
		}},
	}
	for _, c := range cases {
		dir := make3(t)
		c.edit(t, dir)
		d, err := OpenDir(dir)
		if err == nil {
			d.Close()
			t.Errorf("%s: opened", c.name)
			continue
		}
		var e *Error
		if !errors.Is(err, c.kind) || !errors.As(err, &e) || e.Tensor != c.tensor || !strings.Contains(err.Error(), c.inMsg) {
			t.Errorf("%s: got %v (tensor %q), want %v about tensor %q containing %q", c.name, err, e.Tensor, c.kind, c.tensor, c.inMsg)
		}
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), IndexFile) {
		t.Errorf("empty folder: %v", err)
	}
}
