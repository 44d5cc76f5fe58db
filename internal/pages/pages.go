// Package pages gives large buffers transparent huge pages where Linux
// lends them. The central function is Alloc. Nothing here returns an
// error: where the kernel declines (THP off, not Linux, a buffer too
// small to hold a whole huge page) a buffer keeps ordinary pages and
// works the same.
//
// Why: a decode step of a rollout copy streams its 0.99 GB of bf16
// weights from memory, every step. In 4 KiB pages that is a quarter of a
// million TLB entries' worth of translations a step, each missed one a
// page walk, which inside a virtual machine walks the host's tables too;
// and the hardware prefetchers stop at every 4 KiB boundary. In 2 MiB
// pages it is 500. Linux's default THP mode on many systems ("madvise")
// gives huge pages only to ranges a process asks for with madvise. The
// model asks only where R1GO_HUGEPAGES=1 says so (On): on a virtual
// machine whose host maps its memory in small pages they can cost more
// than they save.
package pages

import (
	"os"
	"unsafe"
)

// HugeSize is the huge page size on x86-64 and most arm64 kernels.
const HugeSize = 2 << 20

// MinBytes is the smallest buffer Alloc asks huge pages for: the slack
// that aligns it (up to HugeSize) stays under an eighth of it.
const MinBytes = 8 * HugeSize

// On says whether the model's bf16 arenas and the read probe ask for huge
// pages: R1GO_HUGEPAGES=1. Off by default, because what they are worth
// depends on the machine: reading 512 MiB on 2 cores (BenchmarkReadPages)
// went 1.22 × faster in huge pages on this project's Zen 4 VM but 0.87 ×
// on the GPU machine's Xeon VM (1.07 × there on 16 cores), and its bf16
// rollout decoded 317-454 tok/s with them against 436-521 without, taking
// turns (2026-11-26; the measurement is in git history of
// benchmarks/README.md).
var On = os.Getenv("R1GO_HUGEPAGES") == "1"

// Alloc returns n zero values. With huge set and n values of at least
// MinBytes, the slice starts on a huge-page boundary and its whole huge
// pages are advised huge before anything is written to them, so that
// the first writes fault in huge pages where the kernel has them.
func Alloc[T any](n int, huge bool) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if !huge || size == 0 || n*size < MinBytes || !supported {
		return make([]T, n)
	}
	raw := make([]T, n+HugeSize/size)
	start := uintptr(unsafe.Pointer(&raw[0]))
	off := int((HugeSize - start%HugeSize) % HugeSize)
	if off%size != 0 { // T's size does not divide the distance: no alignment
		return raw[:n:n]
	}
	s := raw[off/size:][:n:n]
	adviseHuge(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n*size))
	return s
}
