//go:build !linux

package pages

const supported = false

func adviseHuge([]byte) {}

// AnonHugeBytes is -1: huge pages are counted on Linux only.
func AnonHugeBytes() int64 { return -1 }

// Mode is "": no THP setting outside Linux.
func Mode() string { return "" }

// Drop is a no-op where madvise is not available.
func Drop([]byte) {}
