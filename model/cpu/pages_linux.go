package cpu

import (
	"os"
	"syscall"
	"unsafe"
)

// pageRange returns the whole pages inside raw, and the bytes of raw
// before and after them.
func pageRange(raw []byte) (pages, head, tail []byte) {
	if len(raw) == 0 {
		return nil, nil, nil
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&raw[0]))
	end := start + uintptr(len(raw))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return nil, raw, nil
	}
	return raw[lo-start : hi-start], raw[:lo-start], raw[hi-start:]
}

// releaseHost zeroes raw, dropping its whole pages: the kernel maps a zero
// page on the next touch. raw holds float32 or bf16 values only (no
// pointers), so the Go collector never reads it.
func releaseHost(raw []byte) {
	pages, head, tail := pageRange(raw)
	clear(head)
	clear(tail)
	if len(pages) > 0 && syscall.Madvise(pages, syscall.MADV_DONTNEED) != nil {
		clear(raw)
	}
}

// residentHost counts the resident pages of x with mincore.
func residentHost(x []float32) (int64, bool) {
	if len(x) == 0 {
		return 0, true
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&x[0]))
	lo := start &^ (page - 1)
	hi := (start + uintptr(4*len(x)) + page - 1) &^ (page - 1)
	vec := make([]byte, (hi-lo)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, lo, hi-lo, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, false
	}
	n := int64(0)
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page), true
}
