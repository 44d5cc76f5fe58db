package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header the reference reader accepts.
const MaxHeaderSize = 100_000_000

// Info describes one tensor of a file. Begin and End are byte offsets into
// the data buffer (which starts at Header.DataStart), End exclusive.
type Info struct {
	Name  string
	DType DType
	Shape []int
	Begin int64
	End   int64
}

// NumElements is the product of the shape (1 for a rank-0 scalar).
func (t Info) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Header is the parsed and validated header of one file.
type Header struct {
	Tensors   []Info            // sorted by Begin, so in file order
	Metadata  map[string]string // nil when the file has no __metadata__
	DataStart int64             // 8 + N: where the data buffer begins
	index     map[string]int    // name -> position in Tensors
}

// Lookup returns the tensor called name.
func (h *Header) Lookup(name string) (Info, bool) {
	i, ok := h.index[name]
	if !ok {
		return Info{}, false
	}
	return h.Tensors[i], true
}

// HeaderLength reads N from the first 8 bytes of a file of fileSize bytes and
// checks it the way the reference reader does before reading the JSON.
func HeaderLength(first8 []byte, fileSize int64, file string) (int64, error) {
	if fileSize < 8 || len(first8) < 8 {
		return 0, newError(file, "", ErrHeaderTooSmall, "%d bytes", fileSize)
	}
	n := binary.LittleEndian.Uint64(first8)
	if n > MaxHeaderSize {
		return 0, newError(file, "", ErrHeaderTooLarge, "N = %d", n)
	}
	if int64(n) > fileSize-8 {
		return 0, newError(file, "", ErrHeaderLength, "N = %d but the file has %d bytes", n, fileSize)
	}
	return int64(n), nil
}

// ParseHeader parses and validates the header of a file of fileSize bytes
// whose first bytes are prefix (at least 8+N of them). It applies every rule
// of the reference reader: N ≤ MaxHeaderSize and 8+N ≤ fileSize; the header
// is UTF-8 JSON holding one object; no key appears twice (tensor names or
// the fields of one tensor); __metadata__ maps strings to strings; each dtype
// is defined by the format; sorted by offsets, the tensors tile the buffer
// from 0 with no gap or overlap; each tensor's byte range equals
// prod(shape) * dtype size; and 8 + N + the end of the last tensor equals
// fileSize. Empty tensors and rank-0 scalars are allowed.
func ParseHeader(prefix []byte, fileSize int64, file string) (*Header, error) {
	n, err := HeaderLength(prefix, fileSize, file)
	if err != nil {
		return nil, err
	}
	if int64(len(prefix)) < 8+n {
		return nil, newError(file, "", ErrHeaderLength, "only %d of %d header bytes given", len(prefix)-8, n)
	}
	raw := prefix[8 : 8+n]
	if !utf8.Valid(raw) {
		return nil, newError(file, "", ErrHeaderUTF8, "")
	}
	h := &Header{DataStart: 8 + n, index: map[string]int{}}
	if err := h.decode(raw, file); err != nil {
		return nil, err
	}
	sort.SliceStable(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	var end int64
	for i, t := range h.Tensors {
		h.index[t.Name] = i
		if t.Begin != end || t.End < t.Begin {
			what := "a gap before it"
			if t.Begin < end {
				what = "it overlaps the previous tensor"
			}
			if t.End < t.Begin {
				what = "end before begin"
			}
			return nil, newError(file, t.Name, ErrInvalidOffset,
				"data_offsets [%d, %d], expected begin %d: %s", t.Begin, t.End, end, what)
		}
		want, kind := byteSize(t.DType, t.Shape)
		if kind != nil {
			return nil, newError(file, t.Name, kind, "shape %v of %s", t.Shape, t.DType)
		}
		if t.End-t.Begin != want {
			return nil, newError(file, t.Name, ErrSizeMismatch,
				"shape %v of %s needs %d bytes, data_offsets [%d, %d] hold %d", t.Shape, t.DType, want, t.Begin, t.End, t.End-t.Begin)
		}
		end = t.End
	}
	if 8+n+end != fileSize {
		return nil, newError(file, "", ErrIncompleteBuffer,
			"header says %d + %d + %d = %d bytes, the file has %d", 8, n, end, 8+n+end, fileSize)
	}
	return h, nil
}

// byteSize is prod(shape) * bits / 8. It fails with ErrOverflow when that
// does not fit in 62 bits and with ErrSizeMismatch when a sub-byte dtype
// does not fill a whole number of bytes.
func byteSize(d DType, shape []int) (int64, error) {
	total := uint64(d.Bits())
	for _, s := range shape {
		hi, lo := bits.Mul64(total, uint64(s))
		if hi != 0 || lo > 1<<62 {
			return 0, ErrOverflow
		}
		total = lo
	}
	if total%8 != 0 {
		return 0, ErrSizeMismatch
	}
	return int64(total / 8), nil
}

// decode reads the JSON object token by token, which is what lets it see
// duplicate keys that encoding/json would silently merge.
func (h *Header) decode(raw []byte, file string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	bad := func(tensor string, err error) error {
		return newError(file, tensor, ErrHeaderJSON, "%v", err)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return bad("", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := readString(dec)
		if err != nil {
			return bad("", err)
		}
		if seen[key] {
			return newError(file, key, ErrDuplicate, "key appears twice in the header")
		}
		seen[key] = true
		if key == "__metadata__" {
			if err := h.decodeMetadata(dec, file); err != nil {
				return err
			}
			continue
		}
		t, err := decodeInfo(dec, key, file)
		if err != nil {
			return err
		}
		h.Tensors = append(h.Tensors, t)
	}
	if err := expectDelim(dec, '}'); err != nil {
		return bad("", err)
	}
	// Only the space padding may follow the object.
	if _, err := dec.Token(); err != io.EOF {
		return bad("", fmt.Errorf("data after the header object"))
	}
	return nil
}

func (h *Header) decodeMetadata(dec *json.Decoder, file string) error {
	tok, err := dec.Token()
	if err != nil {
		return newError(file, "", ErrHeaderJSON, "__metadata__: %v", err)
	}
	if tok == nil { // "__metadata__": null is accepted, as by the reference
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return newError(file, "", ErrMetadata, "got %v", tok)
	}
	h.Metadata = map[string]string{}
	for dec.More() {
		k, err := readString(dec)
		if err != nil {
			return newError(file, "", ErrHeaderJSON, "__metadata__: %v", err)
		}
		if _, dup := h.Metadata[k]; dup {
			return newError(file, "", ErrDuplicate, "__metadata__ key %q appears twice", k)
		}
		tok, err := dec.Token()
		if err != nil {
			return newError(file, "", ErrHeaderJSON, "__metadata__[%q]: %v", k, err)
		}
		v, ok := tok.(string)
		if !ok {
			return newError(file, "", ErrMetadata, "__metadata__[%q] is not a string", k)
		}
		h.Metadata[k] = v
	}
	if err := expectDelim(dec, '}'); err != nil {
		return newError(file, "", ErrHeaderJSON, "__metadata__: %v", err)
	}
	return nil
}

// decodeInfo reads {"dtype":…, "shape":[…], "data_offsets":[b, e]}; fields
// the format does not define are skipped, as the reference reader does.
func decodeInfo(dec *json.Decoder, name, file string) (Info, error) {
	t := Info{Name: name}
	bad := func(format string, args ...any) (Info, error) {
		return Info{}, newError(file, name, ErrHeaderJSON, format, args...)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return bad("tensor entry: %v", err)
	}
	var haveDType, haveShape, haveOffsets bool
	for dec.More() {
		field, err := readString(dec)
		if err != nil {
			return bad("%v", err)
		}
		switch field {
		case "dtype":
			if haveDType {
				return Info{}, newError(file, name, ErrDuplicate, "field dtype appears twice")
			}
			haveDType = true
			s, err := readString(dec)
			if err != nil {
				return bad("dtype: %v", err)
			}
			t.DType = DType(s)
			if !t.DType.Known() {
				return Info{}, newError(file, name, ErrUnknownDType, "%q", s)
			}
		case "shape":
			if haveShape {
				return Info{}, newError(file, name, ErrDuplicate, "field shape appears twice")
			}
			haveShape = true
			dims, err := readInts(dec)
			if err != nil {
				return bad("shape: %v", err)
			}
			t.Shape = make([]int, len(dims))
			for i, d := range dims {
				t.Shape[i] = int(d)
			}
		case "data_offsets":
			if haveOffsets {
				return Info{}, newError(file, name, ErrDuplicate, "field data_offsets appears twice")
			}
			haveOffsets = true
			offs, err := readInts(dec)
			if err != nil {
				return bad("data_offsets: %v", err)
			}
			if len(offs) != 2 {
				return bad("data_offsets has %d numbers, want 2", len(offs))
			}
			t.Begin, t.End = offs[0], offs[1]
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad("%s: %v", field, err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return bad("%v", err)
	}
	switch {
	case !haveDType:
		return bad("missing dtype")
	case !haveShape:
		return bad("missing shape")
	case !haveOffsets:
		return bad("missing data_offsets")
	}
	return t, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, got %v", string(want), tok)
	}
	return nil
}

func readString(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("expected a string, got %v", tok)
	}
	return s, nil
}

// readInts reads an array of non-negative integers below 2^62.
func readInts(dec *json.Decoder) ([]int64, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, err
	}
	var out []int64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, fmt.Errorf("expected a number, got %v", tok)
		}
		v, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil || v < 0 || v > 1<<62 {
			return nil, fmt.Errorf("%s is not a non-negative integer", num)
		}
		out = append(out, v)
	}
	if err := expectDelim(dec, ']'); err != nil {
		return nil, err
	}
	return out, nil
}
