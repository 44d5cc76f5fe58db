package safetensors

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var errorKinds = map[string]error{
	"ErrHeaderTooSmall": ErrHeaderTooSmall, "ErrHeaderTooLarge": ErrHeaderTooLarge,
	"ErrHeaderLength": ErrHeaderLength, "ErrHeaderUTF8": ErrHeaderUTF8, "ErrHeaderJSON": ErrHeaderJSON,
	"ErrDuplicate": ErrDuplicate, "ErrMetadata": ErrMetadata, "ErrUnknownDType": ErrUnknownDType,
	"ErrInvalidOffset": ErrInvalidOffset, "ErrSizeMismatch": ErrSizeMismatch, "ErrOverflow": ErrOverflow,
	"ErrIncompleteBuffer": ErrIncompleteBuffer,
}

// Each malformed file written by make_fixtures.py must fail with its own
// kind, naming the file and (where one is involved) the tensor, on both the
// mapped and the read path.
func TestNegativeFixtures(t *testing.T) {
	raw, err := os.ReadFile("testdata/negative.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct{ Kind, Tensor string }
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 15 {
		t.Fatalf("only %d negative fixtures", len(want))
	}
	for name, w := range want {
		kind, ok := errorKinds[w.Kind]
		if !ok {
			t.Fatalf("%s: unknown kind %s", name, w.Kind)
		}
		path := filepath.Join("testdata", name)
		for _, allowMap := range []bool{true, false} {
			f, err := openFile(path, allowMap)
			if err == nil {
				f.Close()
				t.Errorf("%s: opened without error", name)
				continue
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, kind) {
				t.Errorf("%s: got %v, want kind %s", name, err, w.Kind)
				continue
			}
			if e.File != path || e.Tensor != w.Tensor || !strings.Contains(err.Error(), path) {
				t.Errorf("%s: error %q names file %q tensor %q, want tensor %q", name, err, e.File, e.Tensor, w.Tensor)
			}
		}
	}
}

// pos_mixed.safetensors was written by hand in Python with its entries in
// reverse data order, an undefined extra field, an empty tensor, a scalar
// and an I8 tensor.
func TestPythonWrittenFile(t *testing.T) {
	raw, err := os.ReadFile("testdata/pos_mixed.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Metadata map[string]string
		Tensors  map[string]struct {
			Shape   []int
			F32Bits []uint32 `json:"f32_bits"`
		}
		Unsupported string
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for _, allowMap := range []bool{true, false} {
		f, err := openFile("testdata/pos_mixed.safetensors", allowMap)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Metadata(), want.Metadata) {
			t.Errorf("metadata %v, want %v", f.Metadata(), want.Metadata)
		}
		if got := len(f.Names()); got != len(want.Tensors)+1 {
			t.Errorf("%d tensors, want %d", got, len(want.Tensors)+1)
		}
		for name, w := range want.Tensors {
			info, ok := f.Info(name)
			if !ok || !reflect.DeepEqual(info.Shape, w.Shape) && !(len(info.Shape) == 0 && len(w.Shape) == 0) {
				t.Errorf("%s: info %+v, want shape %v", name, info, w.Shape)
				continue
			}
			got := make([]float32, info.NumElements())
			if err := f.ReadF32(name, got); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for i, b := range w.F32Bits {
				if math.Float32bits(got[i]) != b {
					t.Errorf("%s[%d] = %g, want %g", name, i, got[i], math.Float32frombits(b))
				}
			}
		}
		err = f.ReadF32(want.Unsupported, make([]float32, 3))
		if !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), `"ids"`) {
			t.Errorf("I8 tensor read as float32: %v", err)
		}
		if b, err := f.Bytes(want.Unsupported); err != nil || !reflect.DeepEqual(b, []byte{1, 2, 255}) {
			t.Errorf("raw I8 bytes %v, %v", b, err)
		}
		if err := f.ReadF32("w.f32", make([]float32, 5)); !errors.Is(err, ErrLength) {
			t.Errorf("short destination: %v", err)
		}
		if err := f.ReadF32("nope", nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing tensor: %v", err)
		}
		f.Close()
	}
}

func TestParseHeaderRules(t *testing.T) {
	file := func(header string, data int) []byte {
		b := make([]byte, 8+len(header)+data)
		n := len(header)
		for i := 0; i < 8; i++ {
			b[i] = byte(n >> (8 * i))
		}
		copy(b[8:], header)
		return b
	}
	ok := []string{
		`{}`,
		`{"__metadata__":null}`,
		`  {"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}   `,
		`{"e":{"dtype":"BF16","shape":[0,7],"data_offsets":[0,0]},"f":{"dtype":"F16","shape":[0],"data_offsets":[0,0]}}`,
		`{"p":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}`,
	}
	sizes := []int{0, 0, 4, 0, 2}
	for i, h := range ok {
		if _, err := ParseHeader(file(h, sizes[i]), int64(8+len(h)+sizes[i]), "x"); err != nil {
			t.Errorf("%s rejected: %v", h, err)
		}
	}
	bad := map[string]error{
		`{"p":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`: ErrSizeMismatch, // 12 bits: not whole bytes
		`{"__metadata__":{"a":"b","a":"c"}}`:                    ErrDuplicate,
		`{"__metadata__":["pt"]}`:                               ErrMetadata,
		`[]`:                                                    ErrHeaderJSON,
		`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`:                                                    ErrHeaderJSON,
		`{"a":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}}`:                                                     ErrUnknownDType,
		`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`: ErrInvalidOffset,
	}
	for h, kind := range bad {
		_, err := ParseHeader(file(h, 4), int64(8+len(h)+4), "x")
		if !errors.Is(err, kind) {
			t.Errorf("%s: got %v, want %v", h, err, kind)
		}
	}
}
