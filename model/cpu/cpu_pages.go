package cpu

import "github.com/r1go/r1go/model"

// The CPU device pages (Pager) through the kernel: gradients sent on give
// their whole pages back (madvise), and mincore counts what is resident.
// Only float32 buffers are paged; any other is zeroed in place and its
// residency is unknown.

// ReleasePages zeroes b, giving its whole pages back to the kernel, which
// maps zero pages on the next touch.
func (d *Device[F]) ReleasePages(b model.Buffer) {
	if x, ok := HostFloat32(b); ok {
		releaseHost(x)
		return
	}
	d.Zero(b)
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
