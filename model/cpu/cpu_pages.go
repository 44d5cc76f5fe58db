package cpu

import (
	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model"
)

// The CPU device pages (Pager) through the kernel: gradients sent on,
// dead activations and weights give their whole pages back (madvise),
// spilled state leaves the resident set, and mincore counts what is
// resident. float32 and bf16 buffers are paged; any other is zeroed in
// place. Residency is known for float32 buffers.

// ReleasePages zeroes b, giving its whole pages back to the kernel, which
// maps zero pages on the next touch; a spilled buffer's pages only leave
// the resident set, their values kept in the page cache and its file.
func (d *Device[F]) ReleasePages(b model.Buffer) {
	raw := hostBytes(b)
	switch {
	case raw == nil:
		d.Zero(b)
	case spilled(raw):
		pages.Drop(raw)
	default:
		releaseHost(raw)
	}
}

// MapPages does nothing: host pages come back on the next touch.
func (d *Device[F]) MapPages(model.Buffer) {}

// Resident is how many bytes of b are resident now (mincore), rounded to
// whole pages, known false for a buffer that is not float32 or where the
// kernel cannot say; b is always backed: a released page reads as zeros,
// never faults.
func (d *Device[F]) Resident(b model.Buffer) (bytes int64, known, backed bool) {
	x, ok := HostFloat32(b)
	if !ok {
		return 0, false, true
	}
	bytes, known = residentHost(x)
	return bytes, known, true
}
