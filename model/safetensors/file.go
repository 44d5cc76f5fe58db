package safetensors

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
)

// File is one open safetensors file. Its bytes are memory-mapped where the
// OS allows it and read into memory otherwise; either way the header has
// been fully validated by Open. A File is safe for concurrent reads.
type File struct {
	Path   string
	Header *Header
	data   []byte // the whole file
	mapped bool
}

// Open opens and validates the safetensors file at path.
func Open(path string) (*File, error) { return openFile(path, true) }

// openFile is Open with the mapping optional, so tests can exercise the
// read fallback that other OSes use.
func openFile(path string, allowMap bool) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	// Check the header length before mapping or reading anything large.
	var first8 [8]byte
	if _, err := io.ReadFull(f, first8[:]); err != nil && size >= 8 {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if _, err := HeaderLength(first8[:], size, path); err != nil {
		return nil, err
	}
	var data []byte
	mapped := false
	if allowMap {
		if data, mapped, err = mapFile(f, size); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", path, err)
		}
	}
	if !mapped {
		data = make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", path, err)
		}
	}
	h, err := ParseHeader(data, size, path)
	if err != nil {
		if mapped {
			unmapFile(data)
		}
		return nil, err
	}
	return &File{Path: path, Header: h, data: data, mapped: mapped}, nil
}

// Close releases the mapping. Byte slices from Bytes are invalid after it.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	var err error
	if f.mapped {
		err = unmapFile(f.data)
	}
	f.data = nil
	if err != nil {
		return fmt.Errorf("safetensors: %s: %w", f.Path, err)
	}
	return nil
}

// Names lists the tensor names, sorted.
func (f *File) Names() []string {
	names := make([]string, len(f.Header.Tensors))
	for i, t := range f.Header.Tensors {
		names[i] = t.Name
	}
	sort.Strings(names)
	return names
}

// Info describes the tensor called name.
func (f *File) Info(name string) (Info, bool) { return f.Header.Lookup(name) }

// Metadata is the file's __metadata__ (nil when absent).
func (f *File) Metadata() map[string]string { return f.Header.Metadata }

// Bytes returns the raw little-endian bytes of a tensor, aliasing the file.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.Header.Lookup(name)
	if !ok {
		return nil, newError(f.Path, name, ErrNotFound, "")
	}
	if f.data == nil {
		return nil, fmt.Errorf("safetensors: %s: file is closed", f.Path)
	}
	s := f.Header.DataStart
	return f.data[s+t.Begin : s+t.End], nil
}

// ReadF32 converts the tensor called name into dst, whose length must be
// the tensor's element count. F32, BF16 and F16 are supported.
func (f *File) ReadF32(name string, dst []float32) error {
	t, ok := f.Header.Lookup(name)
	if !ok {
		return newError(f.Path, name, ErrNotFound, "")
	}
	if !t.DType.Float() {
		return newError(f.Path, name, ErrUnsupportedDType, "%s", t.DType)
	}
	if int64(len(dst)) != t.NumElements() {
		return newError(f.Path, name, ErrLength, "destination holds %d values, shape %v has %d", len(dst), t.Shape, t.NumElements())
	}
	src, err := f.Bytes(name)
	if err != nil {
		return err
	}
	decodeParallel(dst, src, t.DType)
	return nil
}

// parallelChunk is the element count per goroutine when converting; below
// two chunks the conversion runs on the calling goroutine.
const parallelChunk = 1 << 18

// decodeParallel splits a large conversion over the CPUs: loading a model is
// bound by this loop once the pages are cached.
func decodeParallel(dst []float32, src []byte, d DType) {
	size := d.Size()
	workers := min(runtime.GOMAXPROCS(0), len(dst)/parallelChunk)
	if workers < 2 {
		DecodeF32(dst, src, d)
		return
	}
	per := (len(dst) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(dst); lo += per {
		hi := min(lo+per, len(dst))
		wg.Add(1)
		go func() {
			defer wg.Done()
			DecodeF32(dst[lo:hi], src[lo*size:hi*size], d)
		}()
	}
	wg.Wait()
}
