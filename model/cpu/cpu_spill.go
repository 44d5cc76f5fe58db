package cpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/r1go/r1go/model"
)

// Host memory by phase on the CPU device (HostMemory; spill.go says what
// the model does with it): a buffer copied into a shared mapping of an
// unlinked file, and pages dropped from the resident set.

// Spill returns a copy of b, a host buffer on the CPU (float32 or
// bf16), in a shared mapping of an unlinked file in dir, of the same kind:
// reads and writes go to the page cache, which the kernel may write back
// and evict under memory pressure and read back on the next touch;
// ReleasePages takes its pages out of the resident set at once, keeping
// its values. The file's disk space
// goes when the process ends. dir must be on a disk (a tmpfs or ramfs
// spill would still be memory, and is refused).
func (d *Device[F]) Spill(b model.Buffer, dir string) (model.Buffer, error) {
	raw := hostBytes(b)
	if raw == nil {
		return nil, fmt.Errorf("spilling needs an allocated host buffer on the CPU (got %T of %d values)", b, b.Len())
	}
	mapped, err := spillFile(dir, raw)
	if err != nil {
		return nil, fmt.Errorf("spill %d bytes to %s: %w", len(raw), dir, err)
	}
	spills.add(mapped)
	p := unsafe.Pointer(&mapped[0])
	switch b.(type) {
	case bf16DotBuf:
		return bf16DotBuf(unsafe.Slice((*uint16)(p), b.Len())), nil
	case bf16Buf:
		return bf16Buf(unsafe.Slice((*uint16)(p), b.Len())), nil
	}
	return cpuBuf[float32](unsafe.Slice((*float32)(p), b.Len())), nil
}

// spills are the address ranges of every spilled buffer's mapping (which
// lives as long as the process), so that ReleasePages keeps the values of
// a buffer in one, or in a part of one.
var spills spillRanges

type spillRanges struct {
	sync.Mutex
	r [][2]uintptr // [start, end)
}

func (s *spillRanges) add(m []byte) {
	s.Lock()
	defer s.Unlock()
	start := uintptr(unsafe.Pointer(&m[0]))
	s.r = append(s.r, [2]uintptr{start, start + uintptr(len(m))})
}

// spilled says whether raw lies in a spilled buffer's mapping.
func spilled(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(&raw[0]))
	spills.Lock()
	defer spills.Unlock()
	for _, r := range spills.r {
		if start >= r[0] && start < r[1] {
			return true
		}
	}
	return false
}

// hostBytes is the memory behind a float32 or bf16 CPU buffer, or nil.
func hostBytes(b model.Buffer) []byte {
	if h, ok := asBF16(b); ok && len(h) > 0 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
	}
	if f, ok := HostFloat32(b); ok && len(f) > 0 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
	}
	return nil
}
