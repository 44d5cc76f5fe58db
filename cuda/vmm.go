package cuda

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/r1go/r1go/model"
)

// Virtual memory management (the driver's cuMem* calls, "VMM"). A large
// allocation reserves an address range (cuMemAddressReserve) and backs it
// with physical chunks of the driver's recommended granularity (2 MiB on
// current GPUs), each created (cuMemCreate), mapped at its place
// (cuMemMap) and opened to this GPU (cuMemSetAccess) on its own. Kernels,
// cuBLAS, copies and NCCL see one contiguous buffer, as from cuMemAlloc;
// but a span of it can later give its whole chunks back (cuMemUnmap and
// cuMemRelease: the memory returns to the driver) while the rest stays in
// use at the same addresses, and take fresh chunks when it is written
// again. That is what model.Pager asks (ReleasePages, MapPages): ZeRO-2
// gives back the gradient arena's buckets once they are reduce-scattered
// and maps each layer's gradients again just before the next Backward
// writes them, so a rank holds its shard and the part in flight, not the
// whole fp32 arena (model/plan/dp.go counts it so).
//
// Where the driver or the GPU lacks VMM (CU_DEVICE_ATTRIBUTE_VIRTUAL_
// MEMORY_MANAGEMENT_SUPPORTED is 0, or the entry points are missing), or
// it is not asked for (Options.VMM, R1GO_CUDA_VMM=1; cmd/train asks under
// dp.zero=2 and dp.shard_masters), every allocation is a plain cuMemAlloc
// and ReleasePages only zeroes: VMMNote says why.
//
// A chunk is unmapped only when the stream has finished with it, but the
// host does not wait for that: ReleasePages records an event on the stream
// and leaves the chunks pending; they are unmapped by a later call that
// finds the event passed (cuEventQuery), so the backward's kernels keep
// the GPU busy while the host gives memory back and maps the next layer's.
// At most vmmMaxPending spans wait at once (the oldest is then waited
// for), MapPages waits for a pending span it needs again, and Sync and
// Free unmap every pending span. Without events it waits for the stream
// (cuStreamSynchronize) as Free does. Released memory reads as zeros once
// mapped again (MapPages zeroes every chunk it maps, Zero maps what it
// clears); reading a span that is released and not mapped again is a
// fault, as it is on the GPU.

const (
	attrVMMSupported          = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	memAllocationTypePinned   = 1   // CU_MEM_ALLOCATION_TYPE_PINNED
	memLocationTypeDevice     = 1   // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessFlagsReadWrite   = 3   // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	memGranularityRecommended = 1   // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
)

// vmmMinChunks is the smallest allocation, in chunks, that VMM backs:
// smaller buffers (scratch, biases, the step's small tensors) gain nothing
// from giving memory back and stay cuMemAlloc's.
const vmmMinChunks = 8

// memAllocationProp is CUmemAllocationProp (32 bytes): pinned device
// memory on one GPU, no shareable handle, no compression.
type memAllocationProp struct {
	typ, handleTypes int32
	locType, locID   int32
	win32Meta        uintptr
	compression      uint8
	rdmaCapable      uint8
	usage            uint16
	reserved         [4]uint8
}

// memAccessDesc is CUmemAccessDesc (12 bytes).
type memAccessDesc struct {
	locType, locID int32
	flags          int32
}

// vmmMaxPending is how many released spans may wait for the stream at
// once: ZeRO-2 releases a bucket as each completes, and the memory plan
// counts this many buckets more (plan.CUDAPending).
const vmmMaxPending = 2

// eventDisableTiming is CU_EVENT_DISABLE_TIMING: the events only order.
const eventDisableTiming = 2

// vmmPending is a span of chunks given back, unmapped once the stream has
// passed ev.
type vmmPending struct {
	a      *vmmArena
	i0, i1 int
	ev     uintptr
}

// vmmArena is one VMM allocation: a reserved range of whole chunks and the
// physical handle behind each (0 where the chunk is given back).
type vmmArena struct {
	base, size, chunk uintptr
	handles           []uint64 // CUmemGenericAllocationHandle per chunk
}

// vmmState is the Device's VMM side.
type vmmState struct {
	on     bool
	note   string  // why VMM is off, or what it uses
	gran   uintptr // chunk bytes
	prop   memAllocationProp
	arenas map[uintptr]*vmmArena // by base address
	mapped int64                 // bytes of chunks mapped now, all arenas
	peak   int64                 // the most mapped at once

	pending []vmmPending // released spans waiting for the stream, oldest first
	events  []uintptr    // spare events
}

// initVMM decides whether large allocations use VMM on this GPU.
func (d *Device) initVMM(off bool) {
	v, drv := &d.vm, d.drv
	v.arenas = map[uintptr]*vmmArena{}
	switch {
	case off && os.Getenv("R1GO_CUDA_VMM") != "1" || os.Getenv("R1GO_CUDA_VMM") == "0":
		v.note = "VMM off (Options.VMM unset, or R1GO_CUDA_VMM=0): arenas are cuMemAlloc'd whole and give no memory back"
		return
	case drv.cuMemAddressReserve == 0 || drv.cuMemAddressFree == 0 || drv.cuMemCreate == 0 || drv.cuMemRelease == 0 ||
		drv.cuMemMap == 0 || drv.cuMemUnmap == 0 || drv.cuMemSetAccess == 0 || drv.cuMemGetAllocationGranularity == 0:
		v.note = "the driver lacks the cuMem* virtual memory calls: arenas are cuMemAlloc'd whole and give no memory back"
		return
	case drv.attribute(d.ord, attrVMMSupported) == 0:
		v.note = "the GPU reports no virtual memory management: arenas are cuMemAlloc'd whole and give no memory back"
		return
	}
	v.prop = memAllocationProp{typ: memAllocationTypePinned, locType: memLocationTypeDevice, locID: d.ord}
	var g uintptr
	r := call(drv.cuMemGetAllocationGranularity, uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(&v.prop)), memGranularityRecommended)
	if r != cudaSuccess || g == 0 {
		v.note = fmt.Sprintf("cuMemGetAllocationGranularity failed (%v): arenas are cuMemAlloc'd whole", drv.errorf(r, "cuMemGetAllocationGranularity"))
		return
	}
	v.on, v.gran = true, g
	v.note = fmt.Sprintf("VMM: allocations of %d KiB or more in %d KiB chunks that can be given back", vmmMinChunks*g>>10, g>>10)
}

// VMM reports whether large allocations are VMM arenas that can give
// memory back (ReleasePages), and a sentence saying what is used and why.
func (d *Device) VMM() (on bool, note string) { return d.vm.on, d.vm.note }

// MappedBytes is how many bytes of VMM chunks the Device has mapped now,
// and the most it had mapped at once.
func (d *Device) MappedBytes() (now, peak int64) {
	defer d.enter()()
	return d.vm.mapped, d.vm.peak
}

// wantVMM says whether an allocation of bytes is a VMM arena.
func (d *Device) wantVMM(bytes int) bool {
	return d.vm.on && uintptr(bytes) >= vmmMinChunks*d.vm.gran
}

// allocVMM reserves bytes rounded up to whole chunks and maps every chunk.
// It returns 0 and the error when the driver refuses (out of memory).
func (d *Device) allocVMM(bytes int) (uintptr, error) {
	v := &d.vm
	size := (uintptr(bytes) + v.gran - 1) / v.gran * v.gran
	var p uintptr
	if err := d.drv.check(call(d.drv.cuMemAddressReserve, uintptr(unsafe.Pointer(&p)), size, v.gran, 0, 0), "cuMemAddressReserve"); err != nil {
		return 0, err
	}
	a := &vmmArena{base: p, size: size, chunk: v.gran, handles: make([]uint64, size/v.gran)}
	if err := d.mapChunks(a, 0, len(a.handles)); err != nil {
		d.unmapChunks(a, 0, len(a.handles))
		call(d.drv.cuMemAddressFree, p, size)
		return 0, err
	}
	v.arenas[p] = a
	return p, nil
}

// freeVMM gives back every chunk of the arena at p and its address range;
// it reports false when p is not a VMM arena.
func (d *Device) freeVMM(p uintptr) bool {
	a, ok := d.vm.arenas[p]
	if !ok {
		return false
	}
	d.reapAll() // the caller has waited for the stream
	d.unmapChunks(a, 0, len(a.handles))
	d.fail(d.drv.check(call(d.drv.cuMemAddressFree, a.base, a.size), "cuMemAddressFree"))
	delete(d.vm.arenas, p)
	return true
}

// mapChunks backs the unmapped chunks [i0, i1) of a with fresh physical
// memory and opens each run of them to this GPU. Their content is
// undefined until written.
func (d *Device) mapChunks(a *vmmArena, i0, i1 int) error {
	desc := memAccessDesc{locType: memLocationTypeDevice, locID: d.ord, flags: memAccessFlagsReadWrite}
	run := -1 // first chunk of the run mapped here and not yet opened
	open := func(end int) error {
		if run < 0 {
			return nil
		}
		at, n := a.base+uintptr(run)*a.chunk, uintptr(end-run)*a.chunk
		run = -1
		return d.drv.check(call(d.drv.cuMemSetAccess, at, n, uintptr(unsafe.Pointer(&desc)), 1), "cuMemSetAccess")
	}
	for i := i0; i < i1; i++ {
		if a.handles[i] != 0 {
			if err := open(i); err != nil {
				return err
			}
			continue
		}
		var h uint64
		if err := d.drv.check(call(d.drv.cuMemCreate, uintptr(unsafe.Pointer(&h)), a.chunk, uintptr(unsafe.Pointer(&d.vm.prop)), 0), "cuMemCreate"); err != nil {
			return err
		}
		if err := d.drv.check(call(d.drv.cuMemMap, a.base+uintptr(i)*a.chunk, a.chunk, 0, uintptr(h), 0), "cuMemMap"); err != nil {
			call(d.drv.cuMemRelease, uintptr(h))
			return err
		}
		a.handles[i] = h
		d.vm.mapped += int64(a.chunk)
		d.vm.peak = max(d.vm.peak, d.vm.mapped)
		if run < 0 {
			run = i
		}
	}
	return open(i1)
}

// unmapChunks gives back the mapped chunks [i0, i1) of a: unmapped, their
// handles released, so the driver frees the memory. The stream must be
// done with them.
func (d *Device) unmapChunks(a *vmmArena, i0, i1 int) {
	for i := i0; i < i1; i++ {
		h := a.handles[i]
		if h == 0 {
			continue
		}
		d.fail(d.drv.check(call(d.drv.cuMemUnmap, a.base+uintptr(i)*a.chunk, a.chunk), "cuMemUnmap"))
		d.fail(d.drv.check(call(d.drv.cuMemRelease, uintptr(h)), "cuMemRelease"))
		a.handles[i] = 0
		d.vm.mapped -= int64(a.chunk)
	}
}

// arenaOf finds the VMM arena holding [p, p+bytes).
func (d *Device) arenaOf(p uintptr, bytes int) *vmmArena {
	for _, a := range d.vm.arenas {
		if p >= a.base && p+uintptr(bytes) <= a.base+a.size {
			return a
		}
	}
	return nil
}

// ReleasePages gives back the memory of b: b reads as zeros from now on,
// and the chunks of a VMM arena that lie wholly inside b are unmapped and
// released once the queued work is done (the partial chunks at its ends
// are zeroed in place). On a buffer that is not a VMM arena's it is Zero.
// It satisfies model.Pager.
func (d *Device) ReleasePages(b model.Buffer) {
	x := b.(Buffer)
	bytes := x.n * x.dtype.Size()
	if bytes == 0 {
		return
	}
	if bytes%4 != 0 || x.ptr%4 != 0 {
		panic(fmt.Sprintf("cuda: ReleasePages of %d %s values at %#x: not whole 4-byte words", x.n, x.dtype, x.ptr))
	}
	defer d.enter()()
	a := d.arenaOf(x.ptr, bytes)
	if a == nil {
		d.memset(x.ptr, 0, bytes/4)
		return
	}
	if !d.captureCheck("giving device memory back") {
		return
	}
	off := x.ptr - a.base
	i0, i1 := int((off+a.chunk-1)/a.chunk), int((off+uintptr(bytes))/a.chunk)
	if i0 >= i1 { // no whole chunk: zero in place
		d.memset(x.ptr, 0, bytes/4)
		return
	}
	lo, hi := a.base+uintptr(i0)*a.chunk, a.base+uintptr(i1)*a.chunk
	d.memset(x.ptr, 0, int(lo-x.ptr)/4)
	d.memset(hi, 0, int(x.ptr+uintptr(bytes)-hi)/4)
	// Kernels queued so far may still read or write the chunks: they are
	// unmapped once the stream has passed this point.
	ev := d.vmEvent()
	if ev == 0 {
		d.fail(d.drv.check(call(d.drv.cuStreamSynchronize, d.stream), "cuStreamSynchronize"))
		d.unmapChunks(a, i0, i1)
		return
	}
	d.vm.pending = append(d.vm.pending, vmmPending{a: a, i0: i0, i1: i1, ev: ev})
	d.reap(len(d.vm.pending) - vmmMaxPending)
}

// vmEvent returns an event recorded on the stream now, or 0 where the
// driver lacks events (the caller then waits for the stream).
func (d *Device) vmEvent() uintptr {
	drv := d.drv
	if drv.cuEventCreate == 0 || drv.cuEventRecord == 0 || drv.cuEventQuery == 0 || drv.cuEventSynchronize == 0 {
		return 0
	}
	var ev uintptr
	if n := len(d.vm.events); n > 0 {
		ev, d.vm.events = d.vm.events[n-1], d.vm.events[:n-1]
	} else if call(drv.cuEventCreate, uintptr(unsafe.Pointer(&ev)), eventDisableTiming) != cudaSuccess {
		return 0
	}
	if call(drv.cuEventRecord, ev, d.stream) != cudaSuccess {
		d.vm.events = append(d.vm.events, ev)
		return 0
	}
	return ev
}

// reap unmaps the pending spans whose event the stream has passed, and
// waits for the oldest force of them first (all of them when force ≥
// len(pending)).
func (d *Device) reap(force int) {
	k := 0
	for ; k < len(d.vm.pending); k++ {
		p := d.vm.pending[k]
		if k < force {
			d.fail(d.drv.check(call(d.drv.cuEventSynchronize, p.ev), "cuEventSynchronize"))
		} else if r := call(d.drv.cuEventQuery, p.ev); r == cudaErrorNotReady {
			break // the stream runs in order: later events have not passed either
		} else if r != cudaSuccess {
			d.fail(d.drv.errorf(r, "cuEventQuery"))
		}
		d.unmapChunks(p.a, p.i0, p.i1)
		d.vm.events = append(d.vm.events, p.ev)
	}
	d.vm.pending = append(d.vm.pending[:0], d.vm.pending[k:]...)
}

// reapAll unmaps every pending span, waiting for the stream.
func (d *Device) reapAll() { d.reap(len(d.vm.pending)) }

// reapOverlapping unmaps, waiting where needed, every pending span of a
// that meets chunks [j0, j1): they are about to be mapped again.
func (d *Device) reapOverlapping(a *vmmArena, j0, j1 int) {
	last := -1
	for k, p := range d.vm.pending {
		if p.a == a && p.i0 < j1 && j0 < p.i1 {
			last = k
		}
	}
	if last >= 0 {
		d.reap(last + 1)
	}
}

// MapPages backs every given-back chunk of a VMM arena that b touches with
// fresh memory, zeroed (the whole chunk: what was given back reads as
// zeros), before b is written again; chunks still mapped are left as they
// are. It does nothing to another buffer. It satisfies model.Pager.
func (d *Device) MapPages(b model.Buffer) {
	x := b.(Buffer)
	bytes := x.n * x.dtype.Size()
	if bytes == 0 {
		return
	}
	defer d.enter()()
	d.mapPages(x.ptr, bytes)
}

// mapPages is MapPages inside the lock.
func (d *Device) mapPages(p uintptr, bytes int) {
	if len(d.vm.arenas) == 0 {
		return
	}
	a := d.arenaOf(p, bytes)
	if a == nil {
		return
	}
	off := p - a.base
	j0, j1 := int(off/a.chunk), int((off+uintptr(bytes)+a.chunk-1)/a.chunk)
	d.reap(0)
	d.reapOverlapping(a, j0, j1)
	for i := j0; i < j1; i++ {
		if a.handles[i] != 0 {
			continue
		}
		k := i
		for k < j1 && a.handles[k] == 0 {
			k++
		}
		if !d.captureCheck("mapping device memory") {
			return
		}
		if err := d.mapChunks(a, i, k); err != nil {
			panic(fmt.Sprintf("cuda: mapping %d bytes of a given-back arena on %s: %v", uintptr(k-i)*a.chunk, d.name, err))
		}
		d.memset(a.base+uintptr(i)*a.chunk, 0, int(uintptr(k-i)*a.chunk/4))
		i = k
	}
}

// Resident is how many bytes of memory back b now (PagedBytes) and
// whether all of it is backed (Backed). It satisfies model.Pager.
func (d *Device) Resident(b model.Buffer) (bytes int64, known, backed bool) {
	bytes, known = d.PagedBytes(b)
	return bytes, known, d.Backed(b)
}

// PagedBytes is how many bytes of memory back b now: those of the VMM
// chunks it touches, or its whole length when it is not in a VMM arena.
func (d *Device) PagedBytes(b model.Buffer) (int64, bool) {
	x := b.(Buffer)
	bytes := x.n * x.dtype.Size()
	defer d.enter()()
	a := d.arenaOf(x.ptr, bytes)
	if a == nil {
		return int64(bytes), true
	}
	off := x.ptr - a.base
	n := int64(0)
	for i := int(off / a.chunk); i < int((off+uintptr(bytes)+a.chunk-1)/a.chunk); i++ {
		if a.handles[i] != 0 {
			n += int64(a.chunk)
		}
	}
	return n, true
}

// Backed says whether every byte of b is backed by mapped memory (always,
// for a buffer outside the VMM arenas).
func (d *Device) Backed(b model.Buffer) bool {
	x := b.(Buffer)
	bytes := x.n * x.dtype.Size()
	defer d.enter()()
	a := d.arenaOf(x.ptr, bytes)
	if a == nil || bytes == 0 {
		return true
	}
	off := x.ptr - a.base
	for i := int(off / a.chunk); i < int((off+uintptr(bytes)+a.chunk-1)/a.chunk); i++ {
		if a.handles[i] == 0 {
			return false
		}
	}
	return true
}

var _ model.Pager = (*Device)(nil)
