//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package safetensors

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only. The mapping outlives f's
// descriptor, so the caller may close f right after.
func mapFile(f *os.File, size int64) ([]byte, bool, error) {
	if size == 0 || int64(int(size)) != size {
		return nil, false, nil // nothing to map, or too large for this address space
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false, nil // fall back to reading (e.g. a filesystem without mmap)
	}
	return b, true, nil
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
