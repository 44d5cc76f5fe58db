package pages

import (
	"testing"
	"unsafe"
)

// TestAllocHuge: a large buffer comes back zeroed, of the length asked,
// on a huge-page boundary; where the kernel lends huge pages on request
// (THP "always" or "madvise"), writing it raises the process's huge-page
// count by most of its size. Small buffers and huge = false are plain.
func TestAllocHuge(t *testing.T) {
	const n = 24 << 20 // values: 48 MiB of uint16
	before := AnonHugeBytes()
	s := Alloc[uint16](n, true)
	if len(s) != n || cap(s) != n {
		t.Fatalf("len %d cap %d, want %d", len(s), cap(s), n)
	}
	for i, v := range s {
		if v != 0 {
			t.Fatalf("value %d is %d before any write", i, v)
		}
	}
	if supported && uintptr(unsafe.Pointer(&s[0]))%HugeSize != 0 {
		t.Fatalf("starts at %#x, not on a %d-byte boundary", uintptr(unsafe.Pointer(&s[0])), HugeSize)
	}
	for i := range s {
		s[i] = uint16(i)
	}
	after := AnonHugeBytes()
	mode := Mode()
	t.Logf("THP mode %q: huge pages %d → %d bytes", mode, before, after)
	if (mode == "always" || mode == "madvise") && before >= 0 && after-before < 2*n/2 {
		t.Errorf("THP %s, but a written %d MiB buffer added %d KiB of huge pages", mode, 2*n>>20, (after-before)>>10)
	}
	for i := range s {
		if s[i] != uint16(i) {
			t.Fatalf("value %d reads %d after writing %d", i, s[i], uint16(i))
		}
	}
	for _, c := range []struct {
		n    int
		huge bool
	}{{1000, true}, {MinBytes/4 - 1, true}, {n, false}} {
		p := Alloc[float32](c.n, c.huge)
		if len(p) != c.n || cap(p) != c.n {
			t.Fatalf("%+v: len %d cap %d", c, len(p), cap(p))
		}
		for i, v := range p {
			if v != 0 {
				t.Fatalf("%+v: value %d is %g", c, i, v)
			}
		}
	}
}

// TestAllocReusedMemory: a buffer from memory the heap had handed out
// and written before still comes back zeroed (the advice drops the old
// pages, which must read as zeros, not as what was written).
func TestAllocReusedMemory(t *testing.T) {
	for round := range 3 {
		s := Alloc[float32](6<<20, true)
		for i, v := range s {
			if v != 0 {
				t.Fatalf("round %d: value %d is %g", round, i, v)
			}
		}
		for i := range s {
			s[i] = 7
		}
	}
}
