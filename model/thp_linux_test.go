package model

import (
	"syscall"
	"unsafe"

	"github.com/r1go/r1go/internal/pages"
)

// thpLent says whether this process gets transparent huge pages when it
// asks: a fresh anonymous mapping, advised MADV_HUGEPAGE and written, must
// add a huge page to AnonHugePages. qemu-user takes the advice without
// passing it on, and a memory cgroup or fragmentation can refuse it; where
// a plain request is refused, the KV arena's cannot be checked.
func thpLent() bool {
	const size = 3 * pages.HugeSize
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return false
	}
	defer syscall.Munmap(b)
	start := uintptr(unsafe.Pointer(&b[0]))
	off := int((pages.HugeSize - start%pages.HugeSize) % pages.HugeSize)
	h := b[off : off+pages.HugeSize]
	before := pages.AnonHugeBytes()
	if before < 0 || syscall.Madvise(h, syscall.MADV_HUGEPAGE) != nil {
		return false
	}
	for i := 0; i < len(h); i += 4096 {
		h[i] = 1
	}
	return pages.AnonHugeBytes()-before >= pages.HugeSize
}
