package cuda

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"unsafe"
)

// kernelID names one __global__ function: its .cu file, its extern "C"
// name, and the block size it is compiled for (its __launch_bounds__,
// which lets the compiler budget registers; a bigger block fails to
// launch). Every launcher declares its kernels through kernel(), so
// allKernels is the list the NVRTC test checks against the sources and
// the compiled images.
type kernelID struct {
	file, name string
	maxThreads int
}

var allKernels []kernelID

func kernel(file, name string, maxThreads int) kernelID {
	k := kernelID{file, name, maxThreads}
	allKernels = append(allKernels, k)
	return k
}

// function returns the loaded kernel, compiling (or reading from the disk
// cache) its file and loading the module on first use.
func (d *Device) function(k kernelID) uintptr {
	if f, ok := d.functions[k]; ok {
		return f
	}
	mod, ok := d.modules[k.file]
	if !ok {
		img, _, err := d.kc.image(k.file, d.arch)
		if err != nil {
			panic(fmt.Sprintf("cuda: kernel %s: %v", k.file, err))
		}
		if err := d.drv.check(call(d.drv.cuModuleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&img[0]))), "cuModuleLoadData("+k.file+")"); err != nil {
			panic(fmt.Sprintf("cuda: loading the compiled %s (%s): %v", k.file, d.arch, err))
		}
		runtime.KeepAlive(img)
		d.modules[k.file] = mod
	}
	var f uintptr
	name := append([]byte(k.name), 0)
	if err := d.drv.check(call(d.drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&name[0]))), "cuModuleGetFunction("+k.name+")"); err != nil {
		panic(fmt.Sprintf("cuda: %s has no kernel %s: %v", k.file, k.name, err))
	}
	d.functions[k] = f
	return f
}

// dim3 is a grid or block shape.
type dim3 struct{ x, y, z int }

func grid1(x int) dim3 { return dim3{x, 1, 1} }

// launch queues kernel k. args are kernel parameters packed with p, i, i64
// and f, in the order of the kernel's C signature.
func (d *Device) launch(k kernelID, grid, block dim3, smem int, args ...uint64) {
	if grid.x == 0 || grid.y == 0 || grid.z == 0 || d.captureErr != nil && d.capturing || d.rb.on {
		return
	}
	if n := block.x * block.y * block.z; n > k.maxThreads || n%32 != 0 {
		panic(fmt.Sprintf("cuda: %s launched with %d threads a block; it is built for at most %d, whole warps", k.name, n, k.maxThreads))
	}
	f := d.function(k)
	if smem > 48<<10 && d.smemSet[k] < smem {
		if smem > d.smemOptin {
			panic(fmt.Sprintf("cuda: %s needs %d bytes of shared memory, the GPU allows %d", k.name, smem, d.smemOptin))
		}
		d.fail(d.drv.check(call(d.drv.cuFuncSetAttribute, f, funcAttrMaxDynamicSharedSize, uintptr(smem)), "cuFuncSetAttribute("+k.name+")"))
		d.smemSet[k] = smem
	}
	params := d.args.pack(args)
	r := call(d.drv.cuLaunchKernel, f, uintptr(grid.x), uintptr(grid.y), uintptr(grid.z),
		uintptr(block.x), uintptr(block.y), uintptr(block.z), uintptr(smem), d.stream, uintptr(unsafe.Pointer(&params[0])), 0)
	runtime.KeepAlive(d.args.slots)
	d.fail(d.drv.check(r, "cuLaunchKernel("+k.name+")"))
}

// argPack holds kernel parameters for cuLaunchKernel, which takes an array
// of pointers, one to each parameter's value. Each value sits in its own
// 8-byte slot; the driver copies as many bytes from a slot as the kernel's
// signature says the parameter has, and on a little-endian machine the
// low bytes of the slot are the 4-byte int or float.
type argPack struct {
	slots []uint64
	ptrs  []uintptr
}

func (a *argPack) pack(args []uint64) []uintptr {
	if cap(a.slots) < len(args) {
		a.slots = make([]uint64, len(args), 2*len(args))
	}
	a.slots = a.slots[:len(args)]
	copy(a.slots, args)
	a.ptrs = a.ptrs[:0]
	for i := range a.slots {
		a.ptrs = append(a.ptrs, uintptr(unsafe.Pointer(&a.slots[i])))
	}
	if len(a.ptrs) == 0 {
		a.ptrs = append(a.ptrs, 0)
	}
	return a.ptrs
}

// Parameter packing: a device address, an int, a long long, a float.
func argPtr(addr uintptr) uint64 { return uint64(addr) }
func argInt(v int) uint64 {
	if v != int(int32(v)) {
		panic(fmt.Sprintf("cuda: kernel argument %d overflows a C int", v))
	}
	return uint64(uint32(int32(v)))
}
func argInt64(v int) uint64     { return uint64(int64(v)) }
func argFloat(v float32) uint64 { return uint64(math.Float32bits(v)) }
func ceilDiv(a, b int) int      { return (a + b - 1) / b }

// elementwiseGrid is the grid of a grid-stride kernel over n elements with
// 256 threads a block: enough blocks to fill the GPU a few times over, no
// more (each thread then loops).
func (d *Device) elementwiseGrid(n int) dim3 {
	return grid1(min(ceilDiv(n, 256), max(d.sms, 1)*16))
}

// intCache keeps device copies of small int32 arrays (token ids,
// positions, sequence offsets, attention tiles) keyed by content: a
// forward uploads its positions once and every layer's RoPE reuses them.
type intCache struct {
	entries []*intEntry // most recently used last
}

type intEntry struct {
	kind string
	vals []int32
	buf  Buffer
	pins int // live graphs that read buf; a pinned entry is never evicted
}

const intCacheSize = 32

// ints returns a device copy of vals, uploading it unless an identical
// array of the same kind is cached.
func (d *Device) ints(kind string, vals []int32) uintptr {
	if d.rb.on {
		return d.rebindInts(kind, vals)
	}
	c := &d.intc
	for j := len(c.entries) - 1; j >= 0; j-- {
		e := c.entries[j]
		if e.kind == kind && slices.Equal(e.vals, vals) {
			c.entries = append(append(c.entries[:j:j], c.entries[j+1:]...), e)
			if d.capturing {
				e.pins++
				d.capturePins = append(d.capturePins, e)
				if d.recordInts {
					d.intCalls = append(d.intCalls, intCall{kind, e})
				}
			}
			return e.buf.ptr
		}
	}
	if !d.captureCheck("uploading a host array (" + kind + ")") {
		return 0
	}
	if len(c.entries) >= intCacheSize {
		// Evict the least recently used unpinned entry, but never one of the
		// intCacheSize/2 most recent: the step being run or recorded may have
		// just uploaded it, and when recorded step graphs pin every older
		// entry the newest would otherwise go, and its capture fail. With
		// none to evict the cache grows past intCacheSize.
		for j, e := range c.entries[:len(c.entries)-intCacheSize/2] {
			if e.pins == 0 {
				d.free(e.buf.ptr)
				c.entries = append(c.entries[:j:j], c.entries[j+1:]...)
				break
			}
		}
	}
	b := d.alloc(max(len(vals), 1), I32)
	if len(vals) > 0 {
		d.upload(b.ptr, unsafe.Pointer(&vals[0]), 4*len(vals))
	}
	c.entries = append(c.entries, &intEntry{kind: kind, vals: slices.Clone(vals), buf: b})
	return b.ptr
}
