package cuda

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/r1go/r1go/model"
)

// DType is the element type a Buffer holds.
type DType uint8

const (
	F32  DType = iota // float32: every buffer the model.Device methods take today
	BF16              // bfloat16, for compute copies of weights and activations
	I32               // int32: token ids, positions, tiles (internal)
)

// Size is the number of bytes of one element.
func (t DType) Size() int {
	switch t {
	case BF16:
		return 2
	default:
		return 4
	}
}

func (t DType) String() string {
	return [...]string{"f32", "bf16", "i32"}[t]
}

// Buffer is a span of device memory: a device address, a length in
// elements and their type. Slice views share the allocation, as
// image.SubImage does.
type Buffer struct {
	ptr   uintptr // device address of element 0
	n     int
	dtype DType
}

func (b Buffer) Len() int     { return b.n }
func (b Buffer) DType() DType { return b.dtype }

func (b Buffer) Slice(off, n int) model.Buffer {
	if off < 0 || n < 0 || off+n > b.n {
		panic(fmt.Sprintf("cuda: Slice(%d, %d) of a buffer of %d", off, n, b.n))
	}
	return Buffer{ptr: b.ptr + uintptr(off*b.dtype.Size()), n: n, dtype: b.dtype}
}

// Device is an NVIDIA GPU as a model.Device: one CUDA context (the
// device's primary context), one stream on which every operation is
// queued in call order, and a cuBLAS handle bound to that stream.
//
// Methods queue work and return; Download, SumSquares and Sync wait for
// it. A failure inside queued work (a launch that fails, a fault) is
// reported by the next Sync, as the model.Device contract says. A Device
// is safe for use by one goroutine at a time; methods take a lock so that
// misuse stays memory-safe.
type Device struct {
	drv    *driver
	blas   *cublas
	kc     *kernelCache
	ord    int32
	ctx    uintptr
	stream uintptr
	handle uintptr // cublasHandle_t
	blasWS Buffer  // the handle's workspace (blasWorkspaceBytes), or none when cuBLAS lacks cublasSetWorkspace_v2

	name         string
	major, minor int
	arch         string
	sms          int
	smemOptin    int
	computeType  int
	mu           sync.Mutex
	err          error // first asynchronous error, returned by Sync
	modules      map[string]uintptr
	functions    map[kernelID]uintptr
	smemSet      map[kernelID]int
	allocs       map[uintptr]int // live allocations: base address → bytes
	mem          memStats        // their accounting (memstats.go)
	vm           vmmState        // VMM arenas (vmm.go)
	intc         intCache
	scratch      map[string]Buffer
	invFreq      map[ropeKey]Buffer
	args         argPack

	opts Options // what OpenWith was given (Reopen)

	deterministic bool   // the tensor-core attention's backward without atomics (attention_tc.go)
	attnForward   string // the tensor-core forward's tile shape (attention_tc.go)
	attnBackward  string // the tensor-core atomic backward's shape (attention_tc.go)

	// Mixed precision (mixed.go): registered weights and their bf16 copies.
	mixed   bool
	weights []weightCopy

	// Step graphs (stepgraph.go).
	stepGraphs  map[string]*stepGraph
	recordInts  bool
	intCalls    []intCall
	rb          rebindState
	scratchGen  int // bumped whenever a scratch buffer moves
	stepReplays int

	// Graph capture state (graph.go).
	capturing   bool
	captureErr  error
	capturePins []*intEntry
}

// Options choose a GPU and the math of the matmuls.
type Options struct {
	Ordinal int  // which GPU (CUDA device ordinal)
	TF32    bool // float32 matmuls on TF32 tensor cores (10-bit mantissa inputs)
	// VMM makes large allocations arenas of chunks that can be given back
	// (vmm.go; also R1GO_CUDA_VMM=1): ZeRO-2 and sharded masters need it.
	// Off, every allocation is one plain cuMemAlloc, the path that ran on
	// an H200; the VMM path has run on the host emulator only so far.
	VMM bool
}

// Open returns the first GPU with default options; R1GO_CUDA_TF32=1 turns
// on TF32 matmuls. The error wraps ErrNoDriver or ErrNoDevice when the
// machine has no driver or no GPU, so callers can fall back to the CPU.
func Open() (*Device, error) {
	return OpenWith(Options{TF32: os.Getenv("R1GO_CUDA_TF32") == "1"})
}

// OpenWith returns the GPU opts.Ordinal.
func OpenWith(opts Options) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n int32
	call(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	if opts.Ordinal < 0 || int32(opts.Ordinal) >= n {
		return nil, fmt.Errorf("%w: GPU %d requested, %d present", ErrNoDevice, opts.Ordinal, n)
	}
	d := &Device{drv: drv, computeType: cublasCompute32F, opts: opts,
		modules: map[string]uintptr{}, functions: map[kernelID]uintptr{}, smemSet: map[kernelID]int{},
		allocs: map[uintptr]int{}, scratch: map[string]Buffer{}, invFreq: map[ropeKey]Buffer{},
		stepGraphs: map[string]*stepGraph{}}
	if opts.TF32 {
		d.computeType = cublasCompute32FFastTF32
	}
	if err := drv.check(call(drv.cuDeviceGet, uintptr(unsafe.Pointer(&d.ord)), uintptr(opts.Ordinal)), "cuDeviceGet"); err != nil {
		return nil, err
	}
	var name [256]byte
	call(drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(d.ord))
	d.name = goString(name[:])
	d.major = drv.attribute(d.ord, attrComputeCapabilityMajor)
	d.minor = drv.attribute(d.ord, attrComputeCapabilityMinor)
	d.sms = drv.attribute(d.ord, attrMultiprocessorCount)
	d.smemOptin = drv.attribute(d.ord, attrMaxSharedMemPerBlockOptin)
	d.arch = archFor(d.major, d.minor)
	if err := drv.check(call(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.ord)), "cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	if err := drv.check(call(drv.cuCtxSetCurrent, d.ctx), "cuCtxSetCurrent"); err != nil {
		return nil, err
	}
	if err := drv.check(call(drv.cuStreamCreate, uintptr(unsafe.Pointer(&d.stream)), 0), "cuStreamCreate"); err != nil {
		return nil, err
	}
	d.initVMM(!opts.VMM)
	if d.blas, err = openCuBLAS(cublasNames()); err != nil {
		return nil, err
	}
	if err := d.blas.check(call(d.blas.cublasCreate, uintptr(unsafe.Pointer(&d.handle))), "cublasCreate_v2"); err != nil {
		return nil, err
	}
	if err := d.blas.check(call(d.blas.cublasSetStream, d.handle, d.stream), "cublasSetStream_v2"); err != nil {
		return nil, err
	}
	if err := d.initBlasWorkspace(); err != nil {
		return nil, err
	}
	// Without NVRTC the device still runs on kernels compiled earlier
	// (PrecompileKernels); a missing one fails at its first launch with a
	// message that says so.
	c, _ := loadNVRTC()
	d.kc = &kernelCache{dir: cacheDir(), compiler: c}
	d.memStatsOpen()
	return d, nil
}

// Reopen opens another Device on the same GPU with the same options: a
// stream, cuBLAS handle and kernel set of its own in the same primary
// context, so that its buffers and this one's are each other's to read
// (Copy between them) and the two run side by side, each from its own
// goroutine (an asynchronous rollout beside the update). Its VMM arenas are
// off: it holds no gradients.
func (d *Device) Reopen() (*Device, error) {
	opts := d.opts
	opts.VMM = false
	return OpenWith(opts)
}

// initBlasWorkspace gives the cuBLAS handle its workspace
// (blasWorkspaceBytes), when cuBLAS has cublasSetWorkspace_v2. It is one
// plain cuMemAlloc even with VMM on: it lives as long as the Device and is
// never given back.
func (d *Device) initBlasWorkspace() error {
	if d.blas.cublasSetWorkspace == 0 {
		return nil
	}
	n := blasWorkspaceBytes(d.major)
	var p uintptr
	if err := d.drv.check(call(d.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)), "cuMemAlloc_v2"); err != nil {
		return fmt.Errorf("cuda: allocating the %d-byte cuBLAS workspace on %s: %w", n, d.name, err)
	}
	d.allocs[p] = n
	d.noteAlloc(n)
	d.blasWS = Buffer{ptr: p, n: n / 4, dtype: F32}
	return d.blas.setWorkspace(d.handle, p, n)
}

// Name is e.g. "cuda(NVIDIA H200, sm_90a, driver 13.0)".
func (d *Device) Name() string {
	v := d.drv.version()
	return fmt.Sprintf("cuda(%s, %s, driver %d.%d)", d.name, d.arch, v/1000, v%1000/10)
}

// Arch is the NVRTC target of this GPU, e.g. "sm_90a".
func (d *Device) Arch() string { return d.arch }

// enter makes the device's context current on this OS thread and holds it
// there (a goroutine may otherwise move between threads between two
// driver calls); the returned function undoes both.
func (d *Device) enter() func() {
	d.mu.Lock()
	runtime.LockOSThread()
	call(d.drv.cuCtxSetCurrent, d.ctx)
	return d.leave
}

func (d *Device) leave() {
	runtime.UnlockOSThread()
	d.mu.Unlock()
}

// fail records the first asynchronous error for Sync.
func (d *Device) fail(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

// ptr unwraps a Buffer of this package; nil is address 0.
func ptr(b model.Buffer) uintptr {
	if b == nil {
		return 0
	}
	x, ok := b.(Buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: buffer %T does not belong to a CUDA device", b))
	}
	return x.ptr
}

// f32 unwraps a float32 Buffer and checks its length when want ≥ 0.
func f32(b model.Buffer, want int, what string) uintptr {
	x, ok := b.(Buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: %s is a %T, not a CUDA buffer", what, b))
	}
	if x.dtype != F32 {
		panic(fmt.Sprintf("cuda: %s holds %s, want f32", what, x.dtype))
	}
	if want >= 0 && x.n < want {
		panic(fmt.Sprintf("cuda: %s holds %d values, the op needs %d", what, x.n, want))
	}
	return x.ptr
}

// f32OrNil is f32 that takes a nil b as the null pointer: an optional
// output, such as a frozen weight's gradient (model.Device's nil dw).
func f32OrNil(b model.Buffer, want int, what string) uintptr {
	if b == nil {
		return 0
	}
	return f32(b, want, what)
}

// Alloc returns n zeroed float32 values. Running out of device memory
// panics: the Device seam has no error path for it, and a training run
// cannot continue without the memory anyway.
func (d *Device) Alloc(n int) model.Buffer {
	defer d.enter()()
	b := d.alloc(n, F32)
	d.memset(b.ptr, 0, n)
	return b
}

// AllocType returns n zeroed elements of type t.
func (d *Device) AllocType(n int, t DType) Buffer {
	defer d.enter()()
	b := d.alloc(n, t)
	d.memset(b.ptr, 0, (n*t.Size()+3)/4)
	return b
}

func (d *Device) alloc(n int, t DType) Buffer {
	if d.rb.on {
		d.rebindFail("allocating device memory")
	}
	d.captureCheck("allocating device memory")
	bytes := max(n*t.Size(), 4)
	bytes = (bytes + 255) &^ 255
	var p uintptr
	if d.wantVMM(bytes) {
		var err error
		if p, err = d.allocVMM(bytes); err != nil {
			panic(fmt.Sprintf("cuda: allocating %d bytes on %s (VMM): %v", bytes, d.name, err))
		}
	} else if err := d.drv.check(call(d.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)), "cuMemAlloc_v2"); err != nil {
		panic(fmt.Sprintf("cuda: allocating %d bytes on %s: %v", bytes, d.name, err))
	}
	d.allocs[p] = bytes
	d.noteAlloc(bytes)
	return Buffer{ptr: p, n: n, dtype: t}
}

// Free releases a buffer from Alloc. It waits for queued work first: the
// memory may still be in use by it.
func (d *Device) Free(b model.Buffer) {
	defer d.enter()()
	q := ptr(b)
	for k, c := range d.weights {
		if c.base == q { // the weights go, and their bf16 copy with them
			d.free(c.bf.ptr)
			d.weights = append(d.weights[:k], d.weights[k+1:]...)
			break
		}
	}
	d.free(q)
}

func (d *Device) free(p uintptr) {
	if p == 0 {
		return
	}
	if _, ok := d.allocs[p]; !ok {
		panic("cuda: Free of a buffer that is not a live allocation (a slice, or freed twice)")
	}
	if !d.captureCheck("freeing device memory") {
		return
	}
	d.fail(d.drv.check(call(d.drv.cuStreamSynchronize, d.stream), "cuStreamSynchronize"))
	if !d.freeVMM(p) {
		d.fail(d.drv.check(call(d.drv.cuMemFree, p), "cuMemFree_v2"))
	}
	d.noteFree(d.allocs[p])
	delete(d.allocs, p)
}

func (d *Device) memset(p uintptr, v uint32, words int) {
	if words == 0 || d.rb.on {
		return
	}
	d.fail(d.drv.check(call(d.drv.cuMemsetD32Async, p, uintptr(v), uintptr(words), d.stream), "cuMemsetD32Async"))
}

// Upload copies src into dst. The copy is queued on the stream; the driver
// stages pageable host memory before returning, so src may be reused at once.
func (d *Device) Upload(dst model.Buffer, src []float32) {
	p, bf, _ := weightArg(dst, -1, "Upload destination")
	if len(src) != dst.Len() {
		panic(fmt.Sprintf("cuda: Upload of %d values into a buffer of %d", len(src), dst.Len()))
	}
	if len(src) == 0 {
		return
	}
	defer d.enter()()
	if bf { // a frozen bf16 model's weights (frozen.go)
		d.uploadBF16(p, src)
		return
	}
	d.upload(p, unsafe.Pointer(&src[0]), 4*len(src))
	d.refresh(p, len(src))
}

// Download copies src into dst and waits for it (and all queued work).
func (d *Device) Download(dst []float32, src model.Buffer) {
	p, bf, _ := weightArg(src, -1, "Download source")
	if len(dst) != src.Len() {
		panic(fmt.Sprintf("cuda: Download of a buffer of %d values into %d", src.Len(), len(dst)))
	}
	if len(dst) == 0 {
		return
	}
	defer d.enter()()
	if bf {
		d.downloadBF16(dst, p)
		return
	}
	d.download(unsafe.Pointer(&dst[0]), p, 4*len(dst))
}

func (d *Device) download(dst unsafe.Pointer, src uintptr, bytes int) {
	if d.rb.on {
		d.rebindFail("downloading to the host")
		return
	}
	if !d.captureCheck("downloading to the host") {
		return
	}
	d.fail(d.drv.check(call(d.drv.cuMemcpyDtoHAsync, uintptr(dst), src, uintptr(bytes), d.stream), "cuMemcpyDtoHAsync_v2"))
	d.fail(d.drv.check(call(d.drv.cuStreamSynchronize, d.stream), "cuStreamSynchronize"))
}

// upload queues a host-to-device copy of raw bytes.
func (d *Device) upload(dst uintptr, src unsafe.Pointer, bytes int) {
	if d.rb.on {
		d.rebindFail("uploading host data")
		return
	}
	if bytes == 0 || !d.captureCheck("uploading host data") {
		return
	}
	d.fail(d.drv.check(call(d.drv.cuMemcpyHtoDAsync, dst, uintptr(src), uintptr(bytes), d.stream), "cuMemcpyHtoDAsync_v2"))
}

func (d *Device) Zero(b model.Buffer) {
	x := b.(Buffer)
	if x.n*x.dtype.Size()%4 != 0 {
		panic("cuda: Zero of a bf16 buffer of odd length")
	}
	defer d.enter()()
	d.mapPages(x.ptr, x.n*x.dtype.Size()) // a given-back span is cleared by mapping it again
	d.memset(x.ptr, 0, (x.n*x.dtype.Size())/4)
	if x.dtype == F32 {
		d.refresh(x.ptr, x.n)
	}
}

// goString is the text of a NUL-terminated byte array.
func goString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func (d *Device) Copy(dst, src model.Buffer) {
	x, y := dst.(Buffer), src.(Buffer)
	conv := x.dtype != y.dtype && (x.dtype == F32 && y.dtype == BF16 || x.dtype == BF16 && y.dtype == F32)
	if x.n != y.n || x.dtype != y.dtype && !conv {
		panic(fmt.Sprintf("cuda: Copy of %d %s values into %d %s", y.n, y.dtype, x.n, x.dtype))
	}
	if x.n == 0 {
		return
	}
	defer d.enter()()
	if d.rb.on {
		return
	}
	if conv { // float32 weights into a frozen bf16 model, rounded (frozen.go)
		d.convertCopy(x, y)
		return
	}
	d.fail(d.drv.check(call(d.drv.cuMemcpyDtoDAsync, x.ptr, y.ptr, uintptr(x.n*x.dtype.Size()), d.stream), "cuMemcpyDtoDAsync_v2"))
	if x.dtype == F32 {
		d.refresh(x.ptr, x.n)
	}
}

// Sync waits for all queued work and returns the first error met since
// the last Sync (a failed launch, a fault inside a kernel).
func (d *Device) Sync() error {
	defer d.enter()()
	if !d.captureCheck("Sync") {
		return nil
	}
	d.fail(d.drv.check(call(d.drv.cuStreamSynchronize, d.stream), "cuStreamSynchronize"))
	d.reapAll() // memory given back waits for the stream no longer
	err := d.err
	d.err = nil
	return err
}

// Close waits for queued work and releases every allocation, the stream,
// the cuBLAS handle and the context reference. The Device is unusable after.
func (d *Device) Close() error {
	err := d.Sync()
	defer d.enter()()
	d.memStatsReport()
	d.reapAll()
	for _, ev := range d.vm.events {
		if d.drv.cuEventDestroy != 0 {
			call(d.drv.cuEventDestroy, ev)
		}
	}
	call(d.blas.cublasDestroy, d.handle) // before its workspace goes
	for p := range d.allocs {
		if !d.freeVMM(p) {
			call(d.drv.cuMemFree, p)
		}
	}
	clear(d.allocs)
	for _, m := range d.modules {
		call(d.drv.cuModuleUnload, m)
	}
	call(d.drv.cuStreamDestroy, d.stream)
	call(d.drv.cuDevicePrimaryCtxRelease, uintptr(d.ord))
	return err
}

// scratchBuf returns a device buffer of at least n elements of type t kept
// under name between calls. Work on the one stream runs in order, so the
// next op may reuse it as soon as it is queued; growing it waits for the
// queue (free does) because queued kernels may still read the old one.
func (d *Device) scratchBuf(name string, n int, t DType) Buffer {
	b, ok := d.scratch[name]
	if ok && b.n >= n && b.dtype == t {
		return Buffer{ptr: b.ptr, n: n, dtype: t}
	}
	if ok {
		d.free(b.ptr)
	}
	d.scratchGen++ // recorded step graphs may read the old buffer
	b = d.alloc(max(n, 1), t)
	d.scratch[name] = b
	return Buffer{ptr: b.ptr, n: n, dtype: t}
}

// MemInfo returns free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int) {
	defer d.enter()()
	return d.memInfo()
}

// memInfo is MemInfo for a caller that holds the Device (memstats.go).
func (d *Device) memInfo() (free, total int) {
	var f, t uintptr
	call(d.drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int(f), int(t)
}

var _ model.Device = (*Device)(nil)
