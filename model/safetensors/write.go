package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
)

// Tensor is one tensor to write. Exactly one of Raw and F32 is set: Raw
// holds the bytes already encoded as DType; F32 holds float32 values that
// the writer rounds to DType (F32, BF16 or F16) while streaming, so a large
// model is never copied whole into a second buffer.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Raw   []byte
	F32   []float32
}

// byteLen is the tensor's size in the file.
func (t *Tensor) byteLen() (int64, error) {
	if !t.DType.Known() {
		return 0, newError("", t.Name, ErrUnknownDType, "%q", string(t.DType))
	}
	for _, d := range t.Shape {
		if d < 0 {
			return 0, newError("", t.Name, ErrInvalidTensor, "negative dimension in shape %v", t.Shape)
		}
	}
	n, kind := byteSize(t.DType, t.Shape)
	if kind != nil {
		return 0, newError("", t.Name, kind, "shape %v of %s", t.Shape, t.DType)
	}
	switch {
	case t.Raw != nil && t.F32 != nil:
		return 0, newError("", t.Name, ErrInvalidTensor, "both Raw and F32 set")
	case t.F32 != nil || t.Raw == nil && n != 0 && t.DType.Float():
		if !t.DType.Float() {
			return 0, newError("", t.Name, ErrUnsupportedDType, "%s", t.DType)
		}
		if int64(len(t.F32))*int64(t.DType.Size()) != n {
			return 0, newError("", t.Name, ErrLength, "%d float32 values for shape %v", len(t.F32), t.Shape)
		}
	default:
		if int64(len(t.Raw)) != n {
			return 0, newError("", t.Name, ErrLength, "%d raw bytes for shape %v of %s, want %d", len(t.Raw), t.Shape, t.DType, n)
		}
	}
	return n, nil
}

// plan validates the tensors, orders them as the reference writer does
// (descending dtype alignment, then name) and returns the padded header.
func plan(tensors []Tensor, meta map[string]string) ([]*Tensor, []byte, int64, error) {
	order := make([]*Tensor, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		if t.Name == "__metadata__" {
			return nil, nil, 0, newError("", t.Name, ErrInvalidTensor, "reserved name")
		}
		if seen[t.Name] {
			return nil, nil, 0, newError("", t.Name, ErrDuplicate, "two tensors with this name")
		}
		seen[t.Name] = true
		order[i] = t
	}
	sort.SliceStable(order, func(i, j int) bool {
		ri, rj := dtypeRank[order[i].DType], dtypeRank[order[j].DType]
		if ri != rj {
			return ri > rj
		}
		return order[i].Name < order[j].Name
	})
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	if meta != nil {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hdr.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			hdr.Write(quote(k))
			hdr.WriteByte(':')
			hdr.Write(quote(meta[k]))
		}
		hdr.WriteByte('}')
	}
	var offset int64
	for i, t := range order {
		n, err := t.byteLen()
		if err != nil {
			return nil, nil, 0, err
		}
		if i > 0 || meta != nil {
			hdr.WriteByte(',')
		}
		hdr.Write(quote(t.Name))
		hdr.WriteString(`:{"dtype":`)
		hdr.Write(quote(string(t.DType)))
		hdr.WriteString(`,"shape":[`)
		for k, d := range t.Shape {
			if k > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, offset, offset+n)
		offset += n
	}
	hdr.WriteByte('}')
	// The only alignment in the format: pad with spaces to 8 bytes.
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxHeaderSize {
		return nil, nil, 0, newError("", "", ErrHeaderTooLarge, "%d bytes", hdr.Len())
	}
	return order, hdr.Bytes(), offset, nil
}

// quote writes s as a JSON string the way serde_json does: no HTML escaping.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Write writes one safetensors file to w. meta becomes __metadata__ (nil
// for none; transformers writes {"format": "pt"}). It returns the number of
// bytes written.
func Write(w io.Writer, tensors []Tensor, meta map[string]string) (int64, error) {
	order, hdr, dataLen, err := plan(tensors, meta)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(len(hdr)))
	bw.Write(n8[:])
	bw.Write(hdr)
	chunk := make([]byte, 0, 1<<20)
	for _, t := range order {
		if t.F32 == nil {
			if _, err := bw.Write(t.Raw); err != nil {
				return 0, fmt.Errorf("safetensors: writing %q: %w", t.Name, err)
			}
			continue
		}
		per := cap(chunk) / t.DType.Size()
		for lo := 0; lo < len(t.F32); lo += per {
			hi := min(lo+per, len(t.F32))
			buf := chunk[:(hi-lo)*t.DType.Size()]
			EncodeF32(buf, t.F32[lo:hi], t.DType)
			if _, err := bw.Write(buf); err != nil {
				return 0, fmt.Errorf("safetensors: writing %q: %w", t.Name, err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("safetensors: %w", err)
	}
	return 8 + int64(len(hdr)) + dataLen, nil
}

// WriteFile writes one safetensors file at path and syncs it to disk.
func WriteFile(path string, tensors []Tensor, meta map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if _, err := Write(f, tensors, meta); err != nil {
		f.Close()
		os.Remove(path)
		if e, ok := err.(*Error); ok && e.File == "" {
			e.File = path
		}
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return nil
}
