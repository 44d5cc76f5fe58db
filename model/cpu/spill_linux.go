package cpu

import (
	"fmt"
	"os"
	"syscall"
)

// Filesystem magic numbers (statfs f_type) of memory-backed filesystems.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// spillFile writes raw to an unlinked file in dir and returns a shared
// read-write mapping of it, holding raw's bytes.
func spillFile(dir string, raw []byte) ([]byte, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil, err
	}
	if st.Type == tmpfsMagic || st.Type == ramfsMagic {
		return nil, fmt.Errorf("%s is a memory filesystem: spilled weights would stay in memory; name a directory on a disk", dir)
	}
	f, err := os.CreateTemp(dir, "r1go-weights-*.spill")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Unlinked at once: the mapping keeps the file, and the disk space
	// returns when the process ends, however it ends.
	if err := os.Remove(f.Name()); err != nil {
		return nil, err
	}
	if _, err := f.Write(raw); err != nil {
		return nil, fmt.Errorf("write %d bytes: %w", len(raw), err)
	}
	mapped, err := syscall.Mmap(int(f.Fd()), 0, len(raw), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes: %w", len(raw), err)
	}
	return mapped, nil
}
