package pages

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

const supported = true

// adviseHuge asks for huge pages under b's whole huge pages. Pages there
// that were touched already (memory the Go heap reused and zeroed) are
// dropped first: anonymous private memory reads as zeros again after
// MADV_DONTNEED, and the next write faults in a huge page, where
// MADV_HUGEPAGE alone would leave them small until khugepaged came by.
func adviseHuge(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + HugeSize - 1) &^ (HugeSize - 1)
	hi := (start + uintptr(len(b))) &^ (HugeSize - 1)
	if hi <= lo {
		return
	}
	r := b[lo-start : hi-start]
	if syscall.Madvise(r, syscall.MADV_DONTNEED) != nil {
		return
	}
	_ = syscall.Madvise(r, syscall.MADV_HUGEPAGE)
}

// AnonHugeBytes is how much of the process's anonymous memory sits in
// transparent huge pages now (AnonHugePages of /proc/self/smaps_rollup),
// or -1 where that cannot be read.
func AnonHugeBytes() int64 {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "AnonHugePages:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// Mode is the kernel's THP setting (the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled: always, madvise or
// never), or "" where it cannot be read.
func Mode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// Drop tells the kernel that the process is done with the whole pages
// of b: they leave the process's resident set. A file mapping's pages stay
// in the page cache (loading a model otherwise holds the mapped file and
// the arena resident together at its peak; spilled weights); anonymous
// memory's read as zeros when next touched (discarded weights).
func Drop(b []byte) {
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
