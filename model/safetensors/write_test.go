package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// The expected header texts and lengths are those of the reference
// implementation's own serialization tests (N = 64, 72, 8 and 40).
func TestWriteMatchesReferenceLayout(t *testing.T) {
	six := []float32{0, 1, 2, 3, 4, 5}
	cases := []struct {
		tensors []Tensor
		meta    map[string]string
		header  string
	}{
		{[]Tensor{{Name: "attn.0", DType: F32, Shape: []int{1, 2, 3}, F32: six}}, nil,
			`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`},
		{[]Tensor{{Name: "attn0", DType: F32, Shape: []int{1, 1, 2, 3}, F32: six}}, nil,
			`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `},
		{nil, nil, `{}      `},
		{nil, map[string]string{"framework": "pt"}, `{"__metadata__":{"framework":"pt"}}     `},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		n, err := Write(&buf, c.tensors, c.meta)
		if err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if int64(len(b)) != n {
			t.Errorf("Write reported %d bytes, wrote %d", n, len(b))
		}
		if got := binary.LittleEndian.Uint64(b); got != uint64(len(c.header)) {
			t.Errorf("N = %d, want %d", got, len(c.header))
		}
		if got := string(b[8 : 8+len(c.header)]); got != c.header {
			t.Errorf("header %q, want %q", got, c.header)
		}
		if len(c.tensors) > 0 {
			data := b[8+len(c.header):]
			for i, v := range six {
				if math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])) != v {
					t.Errorf("value %d wrong", i)
				}
			}
		}
	}
}

func TestWriteOrderAndRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(12)-6)))
		}
		return v
	}
	src := vals(3 * 5)
	tensors := []Tensor{
		{Name: "z", DType: F32, Shape: []int{3, 5}, F32: src},
		{Name: "a", DType: BF16, Shape: []int{3, 5}, F32: src},
		{Name: "b", DType: F16, Shape: []int{15}, F32: src},
		{Name: "c", DType: F32, Shape: []int{}, F32: []float32{2.5}},
		{Name: "i", DType: I64, Shape: []int{2}, Raw: make([]byte, 16)},
		{Name: "e", DType: BF16, Shape: []int{0, 3}},
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var order []string
	for _, ti := range f.Header.Tensors {
		order = append(order, ti.Name)
	}
	if got := strings.Join(order, ","); got != "i,c,z,a,e,b" {
		t.Errorf("file order %s, want i,c,z,a,e,b (descending alignment, then name)", got)
	}
	if f.Header.DataStart%8 != 0 {
		t.Errorf("data starts at %d, not 8-aligned", f.Header.DataStart)
	}
	got := make([]float32, 15)
	for _, c := range []struct {
		name string
		conv func(float32) float32
	}{
		{"z", func(v float32) float32 { return v }},
		{"a", func(v float32) float32 { return bf16.ToFloat32(bf16.FromFloat32(v)) }},
		{"b", func(v float32) float32 { return F16ToF32(F32ToF16(v)) }},
	} {
		if err := f.ReadF32(c.name, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range src {
			if math.Float32bits(got[i]) != math.Float32bits(c.conv(v)) {
				t.Fatalf("%s[%d] = %g, want %g", c.name, i, got[i], c.conv(v))
			}
		}
	}
}

func TestWriteRejects(t *testing.T) {
	cases := map[string]struct {
		tensors []Tensor
		kind    error
	}{
		"duplicate":    {[]Tensor{{Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}}, {Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}}}, ErrDuplicate},
		"length":       {[]Tensor{{Name: "a", DType: BF16, Shape: []int{2}, F32: []float32{1}}}, ErrLength},
		"raw length":   {[]Tensor{{Name: "a", DType: U8, Shape: []int{2}, Raw: []byte{1}}}, ErrLength},
		"both":         {[]Tensor{{Name: "a", DType: F32, Shape: []int{1}, F32: []float32{1}, Raw: make([]byte, 4)}}, ErrInvalidTensor},
		"dtype":        {[]Tensor{{Name: "a", DType: "Q4", Shape: []int{1}, Raw: []byte{1}}}, ErrUnknownDType},
		"int from f32": {[]Tensor{{Name: "a", DType: I32, Shape: []int{1}, F32: []float32{1}}}, ErrUnsupportedDType},
		"reserved":     {[]Tensor{{Name: "__metadata__", DType: F32, Shape: []int{0}}}, ErrInvalidTensor},
		"negative":     {[]Tensor{{Name: "a", DType: F32, Shape: []int{-1}}}, ErrInvalidTensor},
	}
	for name, c := range cases {
		var buf bytes.Buffer
		_, err := Write(&buf, c.tensors, nil)
		var e *Error
		if !errors.Is(err, c.kind) || !errors.As(err, &e) || e.Tensor == "" {
			t.Errorf("%s: got %v, want %v naming the tensor", name, err, c.kind)
		}
	}
}

// runTorchScript runs a Python script that needs torch, trying python3 and
// then /usr/bin/python3 (Debian's python3-torch lives there, which a pyenv
// shim may hide). ok is false when no interpreter has torch.
func runTorchScript(args ...string) (out []byte, err error, ok bool) {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		out, err = exec.Command(py, args...).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || bytes.Contains(out, []byte("No module named 'torch'"))) {
			continue
		}
		return out, err, true
	}
	return nil, nil, false
}

// A file written here must satisfy an independent reader that uses torch's
// rounding as the reference.
func TestWrittenFileCheckedByPython(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	src := make([]float32, 4096)
	for i := range src {
		switch i % 4 {
		case 0:
			src[i] = math.Float32frombits(rng.Uint32())
		case 1:
			src[i] = float32(rng.NormFloat64())
		case 2:
			src[i] = float32(math.Ldexp(rng.Float64(), -rng.Intn(30)))
		default: // ties for bf16 rounding
			src[i] = math.Float32frombits(rng.Uint32()&^0xffff | 0x8000)
		}
	}
	src[0] = float32(math.Inf(-1))
	src[1] = float32(math.NaN())
	tensors := []Tensor{
		{Name: "w.src", DType: F32, Shape: []int{64, 64}, F32: src},
		{Name: "w.bf16", DType: BF16, Shape: []int{64, 64}, F32: src},
		{Name: "w.f16", DType: F16, Shape: []int{64, 64}, F32: src},
		{Name: "e.src", DType: F32, Shape: []int{0}},
		{Name: "e.bf16", DType: BF16, Shape: []int{0}},
		{Name: "s.src", DType: F32, Shape: []int{}, F32: []float32{-3.75}},
		{Name: "s.f16", DType: F16, Shape: []int{}, F32: []float32{-3.75}},
	}
	path := filepath.Join(t.TempDir(), "go.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	out, err, ok := runTorchScript("testdata/check_go_file.py", path)
	if !ok {
		t.Skip("no python3 with torch")
	}
	if err != nil || !strings.HasPrefix(string(out), "ok 4") {
		t.Fatalf("python check: %v\n%s", err, out)
	}
}

func TestReadFallbackMatchesMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	src := []float32{1, 2, 3, 4, 5, 6}
	if err := WriteFile(path, []Tensor{{Name: "m", DType: BF16, Shape: []int{2, 3}, F32: src}}, nil); err != nil {
		t.Fatal(err)
	}
	var got [2][]byte
	for i, allow := range []bool{true, false} {
		f, err := openFile(path, allow)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := f.Bytes("m")
		got[i] = append([]byte(nil), b...)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Bytes("m"); err == nil {
			t.Error("Bytes after Close succeeded")
		}
	}
	if !bytes.Equal(got[0], got[1]) || len(got[0]) != 12 {
		t.Errorf("mapped %v, read %v", got[0], got[1])
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrHeaderTooSmall) {
		t.Errorf("empty file: %v", err)
	}
}

// A tensor large enough to be converted by several goroutines must read
// the same as the one-goroutine conversion.
func TestReadF32ParallelMatchesSerial(t *testing.T) {
	n := 3*parallelChunk + 12345
	src := make([]float32, n)
	rng := rand.New(rand.NewSource(4))
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	if err := WriteFile(path, []Tensor{{Name: "w", DType: F16, Shape: []int{n}, F32: src}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, want := make([]float32, n), make([]float32, n)
	if err := f.ReadF32("w", got); err != nil {
		t.Fatal(err)
	}
	raw, _ := f.Bytes("w")
	if err := DecodeF32(want, raw, F16); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) || want[i] != F16ToF32(F32ToF16(src[i])) {
			t.Fatalf("value %d: parallel %g, serial %g, source %g", i, got[i], want[i], src[i])
		}
	}
}
