package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// parquet-go trusts the sizes a file declares: a corrupt footer length or
// a Thrift list that claims 10^8 elements makes it allocate gigabytes
// before it notices anything wrong, and the process dies of it (the fuzz
// test found both). checkParquet walks the footer and every page header
// first with a decoder that bounds each declared size by the bytes that
// are really there, so such a file is a clear error instead.

// maxPageBytes bounds the uncompressed size of one page. Writers cut pages
// at about 1 MiB (pyarrow's default); 256 MiB leaves room for odd writers.
const maxPageBytes = 256 << 20

// maxThriftDepth bounds struct nesting in a footer or page header; the
// parquet format nests a few levels deep.
const maxThriftDepth = 32

// chunkSpan is where a column chunk's pages lie in the file.
type chunkSpan struct {
	start, size int64
	path        string
}

// checkParquet validates the file's framing, footer and page headers.
func checkParquet(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes: too short for a parquet file", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("reading the footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return fmt.Errorf("no PAR1 magic at the end (found %q)", tail[4:])
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footerLen+12 > size {
		return fmt.Errorf("the footer claims %d bytes in a file of %d", footerLen, size)
	}
	footer := make([]byte, footerLen)
	if _, err := r.ReadAt(footer, size-8-footerLen); err != nil {
		return fmt.Errorf("reading the footer: %w", err)
	}
	d := &thriftWalker{buf: footer}
	var chunks []chunkSpan
	if err := d.fileMetaData(&chunks); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	dataEnd := size - 8 - footerLen
	for _, c := range chunks {
		if c.start < 4 || c.size < 0 || c.start+c.size > dataEnd {
			return fmt.Errorf("column %s: chunk at %d+%d lies outside the data (4..%d)", c.path, c.start, c.size, dataEnd)
		}
		if err := checkPages(r, c); err != nil {
			return fmt.Errorf("column %s: %w", c.path, err)
		}
	}
	return nil
}

// checkPages walks the page headers of one column chunk.
func checkPages(r io.ReaderAt, c chunkSpan) error {
	for pos, end := c.start, c.start+c.size; pos < end; {
		d, err := readPageHeader(r, pos, end)
		if err != nil {
			return fmt.Errorf("page header at %d: %w", pos, err)
		}
		compressed, uncompressed, err := d.pageHeader()
		if err != nil {
			return fmt.Errorf("page header at %d: %w", pos, err)
		}
		if compressed < 0 || uncompressed < 0 || uncompressed > maxPageBytes {
			return fmt.Errorf("page at %d: sizes %d compressed, %d uncompressed", pos, compressed, uncompressed)
		}
		pos += int64(d.pos) + compressed
		if pos > end {
			return fmt.Errorf("page at %d runs past the end of its chunk", pos)
		}
	}
	return nil
}

// readPageHeader reads enough bytes at pos to hold the page header there:
// 512 first, more (up to 1 MiB, for headers with large statistics) while
// the header decodes as truncated and the chunk has more.
func readPageHeader(r io.ReaderAt, pos, end int64) (*thriftWalker, error) {
	for n := int64(512); ; n *= 8 {
		buf := make([]byte, min(end-pos, n))
		if _, err := r.ReadAt(buf, pos); err != nil && err != io.EOF {
			return nil, err
		}
		probe := &thriftWalker{buf: buf}
		_, _, err := probe.pageHeader()
		if !errors.Is(err, errShort) || int64(len(buf)) == end-pos || n >= 1<<20 {
			return &thriftWalker{buf: buf}, nil
		}
	}
}

// Thrift compact protocol type codes.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

var errShort = errors.New("truncated Thrift data")

// thriftWalker reads Thrift compact protocol from a buffer, refusing any
// declared length or count the remaining bytes cannot hold.
type thriftWalker struct {
	buf   []byte
	pos   int
	depth int
}

func (d *thriftWalker) byte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, errShort
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

func (d *thriftWalker) varint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

func (d *thriftWalker) zigzag() (int64, error) {
	v, err := d.varint()
	return int64(v>>1) ^ -int64(v&1), err
}

// count reads a length or element count and checks that at least
// minBytes*n bytes remain.
func (d *thriftWalker) count(n uint64, minBytes int) (int, error) {
	if n > uint64(len(d.buf)-d.pos)/uint64(max(minBytes, 1)) {
		return 0, fmt.Errorf("%w: a length of %d where %d bytes remain", errShort, n, len(d.buf)-d.pos)
	}
	return int(n), nil
}

// skip reads and discards one value of type t.
func (d *thriftWalker) skip(t byte) error {
	switch t {
	case tTrue, tFalse:
		return nil
	case tByte:
		_, err := d.byte()
		return err
	case tI16, tI32, tI64:
		_, err := d.varint()
		return err
	case tDouble:
		if len(d.buf)-d.pos < 8 {
			return errShort
		}
		d.pos += 8
		return nil
	case tBinary:
		n, err := d.varint()
		if err != nil {
			return err
		}
		k, err := d.count(n, 1)
		d.pos += k
		return err
	case tList, tSet:
		n, et, err := d.listHeader()
		if err != nil {
			return err
		}
		for range n {
			if err := d.skip(et); err != nil {
				return err
			}
		}
		return nil
	case tMap:
		n, err := d.varint()
		if err != nil || n == 0 {
			return err
		}
		k, err := d.count(n, 2)
		if err != nil {
			return err
		}
		kv, err := d.byte()
		if err != nil {
			return err
		}
		for range k {
			if err := d.skip(kv >> 4); err != nil {
				return err
			}
			if err := d.skip(kv & 0x0f); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return d.structFields(func(byte, int16) (bool, error) { return false, nil })
	}
	return fmt.Errorf("unknown Thrift type %d", t)
}

func (d *thriftWalker) listHeader() (int, byte, error) {
	h, err := d.byte()
	if err != nil {
		return 0, 0, err
	}
	n := uint64(h >> 4)
	if n == 15 {
		if n, err = d.varint(); err != nil {
			return 0, 0, err
		}
	}
	k, err := d.count(n, 1)
	return k, h & 0x0f, err
}

// structFields walks a struct, calling field for each field header; field
// reads the value itself and returns true, or returns false to skip it.
func (d *thriftWalker) structFields(field func(t byte, id int16) (bool, error)) error {
	if d.depth++; d.depth > maxThriftDepth {
		return errors.New("structs nested too deep")
	}
	defer func() { d.depth-- }()
	var last int16
	for {
		h, err := d.byte()
		if err != nil {
			return err
		}
		t := h & 0x0f
		if t == tStop {
			return nil
		}
		id := last + int16(h>>4)
		if h>>4 == 0 {
			v, err := d.zigzag()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		last = id
		done, err := field(t, id)
		if err != nil {
			return err
		}
		if !done {
			if err := d.skip(t); err != nil {
				return err
			}
		}
	}
}

// list walks a list of structs, calling each for every element.
func (d *thriftWalker) list(t byte, each func() error) error {
	if t != tList {
		return fmt.Errorf("want a list, found Thrift type %d", t)
	}
	n, et, err := d.listHeader()
	if err != nil {
		return err
	}
	if et != tStruct {
		return fmt.Errorf("want a list of structs, found element type %d", et)
	}
	for range n {
		if err := each(); err != nil {
			return err
		}
	}
	return nil
}

// fileMetaData walks FileMetaData and collects its column chunks:
// row_groups (4) -> columns (1) -> meta_data (3) -> path_in_schema (3),
// total_compressed_size (7), data_page_offset (9), dictionary_page_offset
// (11).
func (d *thriftWalker) fileMetaData(chunks *[]chunkSpan) error {
	return d.structFields(func(t byte, id int16) (bool, error) {
		if id != 4 {
			return false, nil
		}
		return true, d.list(t, func() error {
			return d.structFields(func(t byte, id int16) (bool, error) {
				if id != 1 {
					return false, nil
				}
				return true, d.list(t, func() error { return d.columnChunk(chunks) })
			})
		})
	})
}

func (d *thriftWalker) columnChunk(chunks *[]chunkSpan) error {
	return d.structFields(func(t byte, id int16) (bool, error) {
		if id != 3 || t != tStruct {
			return false, nil
		}
		var c chunkSpan
		var dataOff, dictOff int64 = -1, -1
		err := d.structFields(func(t byte, id int16) (bool, error) {
			var err error
			switch {
			case id == 3 && t == tList:
				n, et, err := d.listHeader()
				if err != nil {
					return true, err
				}
				for i := range n {
					if et != tBinary {
						return true, errors.New("path_in_schema is not a list of strings")
					}
					l, err := d.varint()
					if err != nil {
						return true, err
					}
					k, err := d.count(l, 1)
					if err != nil {
						return true, err
					}
					if i > 0 {
						c.path += "."
					}
					c.path += string(d.buf[d.pos : d.pos+k])
					d.pos += k
				}
				return true, nil
			case id == 7 && t == tI64:
				c.size, err = d.zigzag()
				return true, err
			case id == 9 && t == tI64:
				dataOff, err = d.zigzag()
				return true, err
			case id == 11 && t == tI64:
				dictOff, err = d.zigzag()
				return true, err
			}
			return false, nil
		})
		if err != nil {
			return true, err
		}
		c.start = dataOff
		if dictOff > 0 && dictOff < dataOff {
			c.start = dictOff
		}
		*chunks = append(*chunks, c)
		return true, nil
	})
}

// pageHeader walks a PageHeader and returns compressed_page_size (3) and
// uncompressed_page_size (2).
func (d *thriftWalker) pageHeader() (compressed, uncompressed int64, err error) {
	compressed, uncompressed = -1, -1
	err = d.structFields(func(t byte, id int16) (bool, error) {
		var err error
		switch {
		case id == 2 && t == tI32:
			uncompressed, err = d.zigzag()
			return true, err
		case id == 3 && t == tI32:
			compressed, err = d.zigzag()
			return true, err
		}
		return false, nil
	})
	return compressed, uncompressed, err
}
