package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseHeader feeds arbitrary files to the header parser. An accepted
// file must describe tensors that lie inside it and must survive being
// rewritten by Write and parsed again with the same tensors.
func FuzzParseHeader(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.safetensors")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
			f.Add(b)
		}
	}
	var buf bytes.Buffer
	Write(&buf, []Tensor{
		{Name: "a", DType: BF16, Shape: []int{2, 2}, F32: []float32{1, 2, 3, 4}},
		{Name: "b", DType: U8, Shape: []int{3}, Raw: []byte{1, 2, 3}},
		{Name: "c", DType: F4, Shape: []int{2}, Raw: []byte{0x21}},
	}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data, int64(len(data)), "fuzz")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		var tensors []Tensor
		for _, ti := range h.Tensors {
			lo, hi := h.DataStart+ti.Begin, h.DataStart+ti.End
			if lo < h.DataStart || hi > int64(len(data)) || lo > hi {
				t.Fatalf("%s: [%d, %d) outside the file of %d bytes", ti.Name, lo, hi, len(data))
			}
			if got, ok := h.Lookup(ti.Name); !ok || got.Begin != ti.Begin {
				t.Fatalf("%s: lookup failed", ti.Name)
			}
			tensors = append(tensors, Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Raw: data[lo:hi]})
		}
		var out bytes.Buffer
		if _, err := Write(&out, tensors, h.Metadata); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		h2, err := ParseHeader(out.Bytes(), int64(out.Len()), "rewrite")
		if err != nil {
			t.Fatalf("rewritten file rejected: %v", err)
		}
		if len(h2.Tensors) != len(h.Tensors) || !reflect.DeepEqual(h2.Metadata, h.Metadata) && len(h.Metadata)+len(h2.Metadata) > 0 {
			t.Fatalf("rewrite changed the header: %d vs %d tensors", len(h2.Tensors), len(h.Tensors))
		}
		for _, ti := range h.Tensors {
			t2, ok := h2.Lookup(ti.Name)
			if !ok || t2.DType != ti.DType || t2.End-t2.Begin != ti.End-ti.Begin || len(t2.Shape) != len(ti.Shape) {
				t.Fatalf("%s changed in the rewrite", ti.Name)
			}
		}
	})
}

// FuzzParseIndex: any index text either parses into a weight map of plain
// file names or fails with an *Error naming the index.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x","a":"y"}}`))
	f.Add([]byte(`{"weight_map":{"a":1}}`))
	f.Add([]byte(`{"weight_map":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		wm, err := parseIndex(data, "idx.json")
		if err != nil {
			if e, ok := err.(*Error); !ok || e.File != "idx.json" {
				t.Fatalf("error %T without the file: %v", err, err)
			}
			return
		}
		for name, shard := range wm {
			if shard == "" || shard == ".." || filepath.Base(shard) != shard {
				t.Fatalf("tensor %q maps to %q, outside the folder", name, shard)
			}
		}
	})
}
