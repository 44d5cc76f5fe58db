package cpu

import (
	"os"
	"syscall"
	"unsafe"
)

// pageRange returns the whole pages inside x as bytes, and the values of x
// before and after them.
func pageRange(x []float32) (pages []byte, head, tail []float32) {
	if len(x) == 0 {
		return nil, nil, nil
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&x[0]))
	end := start + uintptr(4*len(x))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return nil, x, nil
	}
	all := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
	return all[lo-start : hi-start], x[:(lo-start)/4], x[(hi-start)/4:]
}

// releaseHost zeroes x, dropping its whole pages: the kernel maps a zero
// page on the next touch. x holds float32 values only (no pointers), so
// the Go collector never reads it.
func releaseHost(x []float32) {
	pages, head, tail := pageRange(x)
	clear(head)
	clear(tail)
	if len(pages) > 0 && syscall.Madvise(pages, syscall.MADV_DONTNEED) != nil {
		clear(x)
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
