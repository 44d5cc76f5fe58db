//go:build !linux

package cpu

import "fmt"

// spillFile is Linux-only (madvise releases the mapped pages there).
func spillFile(dir string, raw []byte) ([]byte, error) {
	return nil, fmt.Errorf("spilling weights to a file mapping is implemented on Linux only")
}
