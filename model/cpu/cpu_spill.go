package cpu

import (
	"fmt"
	"unsafe"

	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model"
)

// Host memory by phase on the CPU device (HostMemory; spill.go says what
// the model does with it): a buffer copied into a shared mapping of an
// unlinked file, and pages dropped from the resident set.

// Spill returns a copy of b, a host buffer on the CPU (float32 or
// bf16), in a shared mapping of an unlinked file in dir, of the same kind:
// reads and writes go to the page cache, which the kernel may write back
// and evict under memory pressure and read back on the next touch;
// DropPages releases its resident pages at once. The file's disk space
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
	p := unsafe.Pointer(&mapped[0])
	switch b.(type) {
	case bf16DotBuf:
		return bf16DotBuf(unsafe.Slice((*uint16)(p), b.Len())), nil
	case bf16Buf:
		return bf16Buf(unsafe.Slice((*uint16)(p), b.Len())), nil
	}
	return cpuBuf[float32](unsafe.Slice((*float32)(p), b.Len())), nil
}

// DropPages takes b's whole pages out of the process's resident set: a
// spilled buffer's stay in the page cache (its values remain), other host
// memory reads as zeros when next touched. Not a host buffer: nothing.
func (d *Device[F]) DropPages(b model.Buffer) {
	if raw := hostBytes(b); raw != nil {
		pages.Drop(raw)
	}
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
