package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model/safetensors"
)

// ckptTiny loads the tiny config of the fixtures and random tensors for it,
// with a few values that stress the conversions.
func ckptTiny(t *testing.T, tied bool) (*Config, []NamedTensor) {
	t.Helper()
	cfg, err := LoadConfig("testdata/ckpt_tiny_f32/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TieWordEmbeddings = tied
	rng := rand.New(rand.NewSource(3))
	var ts []NamedTensor
	for _, e := range ExpectedTensors(cfg) {
		n := 1
		for _, d := range e.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.3)
		}
		ts = append(ts, NamedTensor{Name: e.Name, Shape: e.Shape, Data: v})
	}
	special := []float32{float32(math.Copysign(0, -1)), 1e-40, 65519, 3.4e38, 1 + 1.0/256, -7.5e-8}
	copy(ts[0].Data, special)
	return cfg, ts
}

func ckptRead(t *testing.T, w *Weights, name string) []float32 {
	t.Helper()
	shape, ok := w.Shape(name)
	if !ok {
		t.Fatalf("tensor %s missing", name)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	if err := w.ReadF32(name, v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheckpointFloat32BitExact(t *testing.T) {
	cfg, ts := ckptTiny(t, false)
	dir := filepath.Join(t.TempDir(), "out")
	if err := SaveFolder(dir, cfg, nil, ts, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := CheckWeights(w, cfg); err != nil {
		t.Fatal(err)
	}
	for _, nt := range ts {
		got := ckptRead(t, w, nt.Name)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(nt.Data[i]) {
				t.Fatalf("%s[%d]: %g became %g", nt.Name, i, nt.Data[i], got[i])
			}
		}
	}
	back, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil || back.DType != "float32" || back.ParamCount() != cfg.ParamCount() {
		t.Errorf("saved config: %+v, %v", back, err)
	}
	gen, err := LoadGenerationConfig(filepath.Join(dir, "generation_config.json"))
	if err != nil || gen.BOSTokenID != 30 || !reflect.DeepEqual(gen.EOSTokenIDs, []int{31}) || gen.DoSample {
		t.Errorf("generation config from the model config: %+v, %v", gen, err)
	}
}

func TestCheckpointBF16EqualsConversion(t *testing.T) {
	cfg, ts := ckptTiny(t, true)
	dir := filepath.Join(t.TempDir(), "bf16")
	if err := SaveFolder(dir, cfg, DefaultGenerationConfig(), ts, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, nt := range ts {
		got := ckptRead(t, w, nt.Name)
		for i, v := range nt.Data {
			want := bf16.ToFloat32(bf16.FromFloat32(v))
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%s[%d]: %g stored as %g, want %g", nt.Name, i, v, got[i], want)
			}
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !bytes.Contains(raw, []byte(`"torch_dtype": "bfloat16"`)) {
		t.Errorf("default dtype not bfloat16:\n%s", raw)
	}
	gen, _ := LoadGenerationConfig(filepath.Join(dir, "generation_config.json"))
	if gen.TopK != 20 || gen.Temperature != 0.7 {
		t.Errorf("generation config not written from gen: %+v", gen)
	}
}

func TestCheckpointShardsAndIndex(t *testing.T) {
	cfg, ts := ckptTiny(t, false)
	ref := filepath.Join(t.TempDir(), "ref")
	if err := SaveFolder(ref, cfg, nil, ts, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sharded")
	if err := SaveFolder(dir, cfg, nil, ts, SaveOptions{DType: "bfloat16", MaxShardBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if len(shards) < 3 {
		t.Fatalf("%d shards at a 1000-byte limit", len(shards))
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		t.Error("model.safetensors written beside shards")
	}
	var index struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		}
		WeightMap map[string]string `json:"weight_map"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	if index.Metadata.TotalSize != 2*cfg.ParamCount() || len(index.WeightMap) != len(ts) {
		t.Errorf("total_size %d (want %d), %d entries (want %d)", index.Metadata.TotalSize, 2*cfg.ParamCount(), len(index.WeightMap), len(ts))
	}
	// Shards fill in module order: the embedding is in the first shard, lm_head in the last.
	if index.WeightMap["model.embed_tokens.weight"] != filepath.Base(shards[0]) || index.WeightMap["lm_head.weight"] != filepath.Base(shards[len(shards)-1]) {
		t.Errorf("shard order: embed in %s, lm_head in %s", index.WeightMap["model.embed_tokens.weight"], index.WeightMap["lm_head.weight"])
	}
	for _, s := range shards {
		if st, _ := os.Stat(s); st.Size() > 1000+4096 {
			t.Errorf("%s is %d bytes", s, st.Size())
		}
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWeights(w, cfg); err != nil {
		t.Error(err)
	}
	w.Close()
	ckptPython(t, ref, dir)
}

func TestCheckpointTiedDropsLMHead(t *testing.T) {
	cfg, ts := ckptTiny(t, true)
	ts = append(ts, NamedTensor{Name: "lm_head.weight", Shape: ts[0].Shape, Data: ts[0].Data})
	dir := filepath.Join(t.TempDir(), "tied")
	if err := SaveFolder(dir, cfg, nil, ts, SaveOptions{DType: "float16"}); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, ok := w.Shape("lm_head.weight"); ok {
		t.Error("tied config stored lm_head.weight")
	}
	if len(w.Names()) != len(ts)-1 || CheckWeights(w, cfg) != nil {
		t.Errorf("%d tensors stored: %v", len(w.Names()), CheckWeights(w, cfg))
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if err := SaveFolder(ref, cfg, nil, ts, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	ckptPython(t, ref, dir)
}

// ckptPython runs the independent folder checker when torch is installed.
func ckptPython(t *testing.T, ref, dir string) {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		out, err := exec.Command(py, "testdata/ckpt_check.py", ref, dir).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || bytes.Contains(out, []byte("No module named 'torch'"))) {
			continue
		}
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Errorf("python check of %s: %v\n%s", dir, err, out)
		}
		return
	}
	t.Log("no python3 with torch: independent folder check skipped")
}

// The fixtures were written by Python with torch's conversions; reading
// them must give our own conversion of the float32 values, bit for bit.
func TestCheckpointPythonFixtures(t *testing.T) {
	ref, err := OpenWeights("testdata/ckpt_tiny_f32")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, c := range []struct {
		dir   string
		round func(float32) float32
	}{
		{"testdata/ckpt_tiny_bf16_tied", func(v float32) float32 { return bf16.ToFloat32(bf16.FromFloat32(v)) }},
		{"testdata/ckpt_tiny_f16_shards", func(v float32) float32 { return safetensors.F16ToF32(safetensors.F32ToF16(v)) }},
		{"testdata/ckpt_tiny_f32", func(v float32) float32 { return v }},
	} {
		cfg, err := LoadConfig(filepath.Join(c.dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		w, err := OpenWeights(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckWeights(w, cfg); err != nil {
			t.Errorf("%s: %v", c.dir, err)
		}
		if n := len(w.Names()); n != len(ExpectedTensors(cfg)) {
			t.Errorf("%s: %d tensors, want %d", c.dir, n, len(ExpectedTensors(cfg)))
		}
		for _, name := range w.Names() {
			got, want := ckptRead(t, w, name), ckptRead(t, ref, name)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(c.round(want[i])) {
					t.Fatalf("%s %s[%d] = %g, want %g", c.dir, name, i, got[i], c.round(want[i]))
				}
			}
		}
		w.Close()
	}
}

func TestCheckpointCheckWeightsNamesProblems(t *testing.T) {
	cfg, ts := ckptTiny(t, false)
	dir := filepath.Join(t.TempDir(), "m")
	// Stored as a tied model with one tensor reshaped, then checked against the untied config.
	tied := *cfg
	tied.TieWordEmbeddings = true
	extra := append([]NamedTensor(nil), ts...)
	extra = append(extra, NamedTensor{Name: "score.weight", Shape: []int{1, 8}, Data: make([]float32, 8)})
	if err := SaveFolder(dir, &tied, nil, extra, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bigger := *cfg
	bigger.IntermediateSize = 24
	err = CheckWeights(w, &bigger)
	for _, want := range []string{"tensor lm_head.weight is missing", "unexpected tensor score.weight",
		"tensor model.layers.0.mlp.gate_proj.weight has shape [16 8], the config implies [24 8]", dir} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckWeights: %v\nwant it to mention %q", err, want)
		}
	}
}

func TestCheckpointSaveIsAtomic(t *testing.T) {
	cfg, ts := ckptTiny(t, false)
	parent := t.TempDir()
	dir := filepath.Join(parent, "model")
	// A bad call fails before anything appears.
	for name, bad := range map[string]func() error{
		"missing tensor": func() error { return SaveFolder(dir, cfg, nil, ts[1:], SaveOptions{}) },
		"wrong shape": func() error {
			b := append([]NamedTensor(nil), ts...)
			b[1] = NamedTensor{Name: b[1].Name, Shape: []int{4, 2}, Data: b[1].Data}
			return SaveFolder(dir, cfg, nil, b, SaveOptions{})
		},
		"short data": func() error {
			b := append([]NamedTensor(nil), ts...)
			b[2].Data = b[2].Data[:1]
			return SaveFolder(dir, cfg, nil, b, SaveOptions{})
		},
		"dtype":          func() error { return SaveFolder(dir, cfg, nil, ts, SaveOptions{DType: "int8"}) },
		"no tokenizer":   func() error { return SaveFolder(dir, cfg, nil, ts, SaveOptions{TokenizerDir: t.TempDir()}) },
		"duplicate name": func() error { return SaveFolder(dir, cfg, nil, append(ts, ts[0]), SaveOptions{}) },
	} {
		if err := bad(); err == nil {
			t.Errorf("%s: saved", name)
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 0 {
			t.Errorf("%s: left %v behind", name, entries[0].Name())
		}
	}
	// Tokenizer files are copied byte for byte; a second save replaces the folder.
	tok := t.TempDir()
	files := map[string][]byte{"tokenizer.json": []byte("{\"version\": \"1.0\"}\r\n"), "merges.txt": []byte("#version: 0.2\nĠ Ġ\n"),
		"chat_template.jinja": []byte("{{ messages }}"), "README.md": []byte("not copied")}
	for n, b := range files {
		os.WriteFile(filepath.Join(tok, n), b, 0o644)
	}
	if err := SaveFolder(dir, cfg, nil, ts, SaveOptions{DType: "float32", MaxShardBytes: 800}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "stale.txt"), []byte("x"), 0o644)
	if err := SaveFolder(dir, cfg, nil, ts, SaveOptions{TokenizerDir: tok}); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if n == "README.md" {
			if err == nil {
				t.Error("README.md copied as a tokenizer file")
			}
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: %q, want %q", n, got, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"chat_template.jinja", "config.json", "generation_config.json", "merges.txt", "model.safetensors", "tokenizer.json"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("folder holds %v, want %v (old shards and stale files gone)", names, want)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("parent holds %d entries, want only the model folder", len(entries))
	}
}

func TestCheckpointExpectedTensors7B(t *testing.T) {
	cfg, err := LoadConfig("testdata/config_qwen2.5-7b.json")
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{}
	for _, e := range ExpectedTensors(cfg) {
		shapes[e.Name] = e.Shape
	}
	// formats.md §1.5's 7B shapes.
	for name, want := range map[string][]int{
		"model.layers.27.self_attn.q_proj.weight": {3584, 3584}, "model.layers.27.self_attn.k_proj.weight": {512, 3584},
		"model.layers.0.self_attn.v_proj.bias": {512}, "model.layers.0.self_attn.o_proj.weight": {3584, 3584},
		"model.layers.3.mlp.gate_proj.weight": {18944, 3584}, "model.layers.3.mlp.down_proj.weight": {3584, 18944},
		"lm_head.weight": {152064, 3584}, "model.norm.weight": {3584},
	} {
		if !reflect.DeepEqual(shapes[name], want) {
			t.Errorf("%s: %v, want %v", name, shapes[name], want)
		}
	}
	if _, ok := shapes["model.layers.0.self_attn.o_proj.bias"]; ok {
		t.Error("o_proj has a bias")
	}
}
