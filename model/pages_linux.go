package model

import (
	"os"
	"syscall"
	"unsafe"
)

// dropPages tells the kernel that the process is done with the whole pages
// of b: they leave the process's resident set. A file mapping's pages stay
// in the page cache (loading a model otherwise holds the mapped file and
// the arena resident together at its peak; spilled weights); anonymous
// memory's read as zeros when next touched (discarded weights).
func dropPages(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	end := start + uintptr(len(b))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(b[lo-start:hi-start], syscall.MADV_DONTNEED)
}
