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

// PagedBytes is how many bytes of b are resident now (mincore), rounded
// to whole pages; false for a buffer that is not float32 or where the
// kernel cannot say.
func (d *Device[F]) PagedBytes(b model.Buffer) (int64, bool) {
	x, ok := HostFloat32(b)
	if !ok {
		return 0, false
	}
	return residentHost(x)
}

// Backed is true: a released page reads as zeros, never faults.
func (d *Device[F]) Backed(model.Buffer) bool { return true }
