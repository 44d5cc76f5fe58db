package data

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// Inputs the fuzz test found or that follow from them: sizes a file
// declares but cannot hold. Each must be an error before parquet-go
// allocates what the size says.
func TestCheckParquetRefusesImpossibleSizes(t *testing.T) {
	good, err := os.ReadFile("testdata/searchr1_element.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkParquet(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("a good file fails the check: %v", err)
	}

	// A footer length of 4 GB in a 7 kB file.
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[len(bad)-8:], 0xfffffff0)
	if err := checkParquet(bytes.NewReader(bad), int64(len(bad))); err == nil || !strings.Contains(err.Error(), "the footer claims") {
		t.Errorf("huge footer length: %v", err)
	}

	// A schema list that claims 2^28 elements: rewrite the footer with the
	// count as a 4-byte varint and fix the footer length.
	footerLen := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	footer := good[len(good)-8-footerLen : len(good)-8]
	// FileMetaData: field 1 (version, i32) then field 2 (schema, list).
	at := bytes.IndexByte(footer[2:], 0x19) + 2
	if footer[0] != 0x15 || at < 2 || footer[at+1]&0x0f != tStruct {
		t.Fatalf("unexpected footer start % x", footer[:8])
	}
	rest := at + 2 // past a short-form list header (count in the high nibble)
	if footer[at+1]>>4 == 15 {
		_, n := binary.Uvarint(footer[at+2:]) // long form: the count follows
		rest += n
	}
	var forged []byte
	forged = append(forged, good[:len(good)-8-footerLen]...)
	forged = append(forged, footer[:at+1]...)
	forged = append(forged, 0xf0|tStruct, 0xff, 0xff, 0xff, 0x7f) // count 2^28-1
	forged = append(forged, footer[rest:]...)
	newFooterLen := (at + 1) + 5 + (footerLen - rest)
	forged = binary.LittleEndian.AppendUint32(forged, uint32(newFooterLen))
	forged = append(forged, "PAR1"...)
	if err := checkParquet(bytes.NewReader(forged), int64(len(forged))); err == nil || !strings.Contains(err.Error(), "a length of 268435455") {
		t.Errorf("huge list count: %v", err)
	}
	path := t.TempDir() + "/forged.parquet"
	if err := os.WriteFile(path, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(path, LoadOptions{}); err == nil || !strings.HasPrefix(err.Error(), "data: "+path+": not a readable parquet file: footer:") {
		t.Errorf("Load of the forged file: %v", err)
	}
}

func TestCheckPages(t *testing.T) {
	// PageHeader{type: DATA_PAGE, uncompressed_page_size: u, compressed_page_size: c}
	header := func(u, c int64) []byte {
		b := []byte{0x15, 0x00, 0x15}
		b = binary.AppendUvarint(b, uint64(u<<1)) // zigzag of a positive value
		b = append(b, 0x15)
		b = binary.AppendUvarint(b, uint64(c<<1))
		return append(b, 0x00)
	}
	page := append(header(10, 5), "12345"...)
	two := append(append([]byte(nil), page...), page...)
	if err := checkPages(bytes.NewReader(two), chunkSpan{0, int64(len(two)), "x"}); err != nil {
		t.Fatalf("two good pages: %v", err)
	}
	// A header with 3000 bytes of statistics (field 5, a struct holding a
	// binary) is longer than the first read and still checks.
	big := header(10, 5)
	big = big[:len(big)-1] // reopen the struct
	big = append(big, 0x2c, 0x18)
	big = binary.AppendUvarint(big, 3000)
	big = append(big, bytes.Repeat([]byte{'s'}, 3000)...)
	big = append(big, 0x00, 0x00)
	big = append(big, "12345"...)
	if err := checkPages(bytes.NewReader(big), chunkSpan{0, int64(len(big)), "x"}); err != nil {
		t.Fatalf("a page with large statistics: %v", err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"huge page", append(header(1<<30, 5), "12345"...), "uncompressed"},
		{"past the chunk", append(header(10, 50), "12345"...), "runs past the end"},
		{"cut header", header(10, 5)[:4], "truncated"},
	} {
		err := checkPages(bytes.NewReader(tc.data), chunkSpan{0, int64(len(tc.data)), "x"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}

func TestThriftWalkerBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"binary longer than the buffer", []byte{0x18, 0x7f}},
		{"deep nesting", bytes.Repeat([]byte{0x1c}, 100)},
		{"long varint", append([]byte{0x16}, bytes.Repeat([]byte{0xff}, 11)...)},
		{"unknown type", []byte{0x1e}},
		{"map claiming many pairs", []byte{0x1b, 0xff, 0xff, 0x03}},
	} {
		d := &thriftWalker{buf: tc.data}
		if err := d.skip(tStruct); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
