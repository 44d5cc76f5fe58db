package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoDriver means libcuda.so.1 could not be loaded: no NVIDIA driver is
// installed (or R1GO_LIBCUDA names a file that does not load).
var ErrNoDriver = errors.New("cuda: no CUDA driver found")

// ErrNoDevice means the driver loaded but reports no usable GPU.
var ErrNoDevice = errors.New("cuda: CUDA driver found but no GPU")

// CUresult values the package treats specially.
const (
	cudaSuccess            = 0
	cudaErrorNotReady      = 600
	cudaErrorNoDevice      = 100
	cudaErrorInvalidDevice = 101
)

// Device attributes (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock        = 1
	attrMaxSharedMemoryPerBlock   = 8
	attrMultiprocessorCount       = 16
	attrComputeCapabilityMajor    = 75
	attrComputeCapabilityMinor    = 76
	attrMaxSharedMemPerBlockOptin = 97
)

// funcAttrMaxDynamicSharedSize is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const funcAttrMaxDynamicSharedSize = 8

// driver holds the entry points of libcuda. Versioned names come first: a
// plain name in libcuda is often the legacy ABI (cuMemAlloc is 32-bit).
type driver struct {
	lib library

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet        uintptr
	cuDeviceGetAttribute, cuDeviceGetName, cuDeviceTotalMem          uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease              uintptr
	cuCtxSetCurrent, cuCtxSynchronize                                uintptr
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy             uintptr
	cuMemAlloc, cuMemFree, cuMemGetInfo                              uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync          uintptr
	cuMemsetD32Async                                                 uintptr
	cuModuleLoadData, cuModuleGetFunction, cuModuleUnload            uintptr
	cuFuncSetAttribute, cuLaunchKernel                               uintptr
	cuGetErrorName, cuGetErrorString                                 uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate     uintptr
	cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy                uintptr
	cuEventCreate, cuEventRecord, cuEventElapsedTime, cuEventDestroy uintptr
	cuEventSynchronize, cuEventQuery                                 uintptr

	// Virtual memory management (vmm.go); optional: without them every
	// allocation is cuMemAlloc's.
	cuMemAddressReserve, cuMemAddressFree, cuMemCreate, cuMemRelease uintptr
	cuMemMap, cuMemUnmap, cuMemSetAccess                             uintptr
	cuMemGetAllocationGranularity                                    uintptr
}

// driverNames is where libcuda is looked for; tests replace it.
var driverNames = func() []string {
	return searchNames("R1GO_LIBCUDA", "libcuda.so.1", "libcuda.so")
}

var (
	driverOnce sync.Once
	theDriver  *driver
	driverErr  error
)

// loadDriver opens libcuda once per process, binds its entry points and
// runs cuInit. The error wraps ErrNoDriver or ErrNoDevice where one applies.
func loadDriver() (*driver, error) {
	driverOnce.Do(func() { theDriver, driverErr = openDriver(driverNames()) })
	return theDriver, driverErr
}

func openDriver(names []string) (*driver, error) {
	lib, err := openFirst(names)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoDriver, err)
	}
	d := &driver{lib: lib}
	// Entry points the package does not call yet are optional, so that a
	// driver which renamed one (CUDA 13 added _v2 variants) still loads.
	table := []binding{
		bind(&d.cuInit, "cuInit"),
		bind(&d.cuDriverGetVersion, "cuDriverGetVersion"),
		bind(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		bind(&d.cuDeviceGet, "cuDeviceGet"),
		bind(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		bind(&d.cuDeviceGetName, "cuDeviceGetName"),
		bindOptional(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		bind(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		bind(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		bind(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		bindOptional(&d.cuCtxSynchronize, "cuCtxSynchronize"),
		bind(&d.cuStreamCreate, "cuStreamCreate"),
		bind(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		bind(&d.cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
		bind(&d.cuMemAlloc, "cuMemAlloc_v2"),
		bind(&d.cuMemFree, "cuMemFree_v2"),
		bind(&d.cuMemGetInfo, "cuMemGetInfo_v2"),
		bind(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		bind(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		bind(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		bind(&d.cuMemsetD32Async, "cuMemsetD32Async"),
		bind(&d.cuModuleLoadData, "cuModuleLoadData"),
		bind(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		bind(&d.cuModuleUnload, "cuModuleUnload"),
		bind(&d.cuFuncSetAttribute, "cuFuncSetAttribute"),
		bind(&d.cuLaunchKernel, "cuLaunchKernel"),
		bind(&d.cuGetErrorName, "cuGetErrorName"),
		bind(&d.cuGetErrorString, "cuGetErrorString"),
		bindOptional(&d.cuEventCreate, "cuEventCreate"),
		bindOptional(&d.cuEventRecord, "cuEventRecord"),
		bindOptional(&d.cuEventSynchronize, "cuEventSynchronize"),
		bindOptional(&d.cuEventQuery, "cuEventQuery"),
		bindOptional(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		bindOptional(&d.cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
		bindOptional(&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
		bindOptional(&d.cuStreamEndCapture, "cuStreamEndCapture"),
		bindOptional(&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"),
		bindOptional(&d.cuGraphLaunch, "cuGraphLaunch"),
		bindOptional(&d.cuGraphExecDestroy, "cuGraphExecDestroy"),
		bindOptional(&d.cuGraphDestroy, "cuGraphDestroy"),
		bindOptional(&d.cuMemAddressReserve, "cuMemAddressReserve"),
		bindOptional(&d.cuMemAddressFree, "cuMemAddressFree"),
		bindOptional(&d.cuMemCreate, "cuMemCreate"),
		bindOptional(&d.cuMemRelease, "cuMemRelease"),
		bindOptional(&d.cuMemMap, "cuMemMap"),
		bindOptional(&d.cuMemUnmap, "cuMemUnmap"),
		bindOptional(&d.cuMemSetAccess, "cuMemSetAccess"),
		bindOptional(&d.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
	}
	if err := lib.bindAll(table); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	if r := call(d.cuInit, 0); r != cudaSuccess {
		err := d.errorf(r, "cuInit")
		if r == cudaErrorNoDevice || r == cudaErrorInvalidDevice {
			return nil, fmt.Errorf("%w (%v)", ErrNoDevice, err)
		}
		return nil, err
	}
	var n int32
	if r := call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); r != cudaSuccess {
		return nil, d.errorf(r, "cuDeviceGetCount")
	}
	if n == 0 {
		return nil, fmt.Errorf("%w (cuDeviceGetCount returned 0)", ErrNoDevice)
	}
	return d, nil
}

// Error is a failed driver, cuBLAS or NVRTC call: the call and its result
// code, with the library's name for the code when it has one.
type Error struct {
	Call string // the C function, e.g. "cuMemAlloc_v2"
	Code int    // CUresult, cublasStatus_t or nvrtcResult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the library's description, when known
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s failed: %s (%d)", e.Call, e.Name, e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// errorf wraps a CUresult with the driver's own name and description.
func (d *driver) errorf(r int, what string) error {
	e := &Error{Call: what, Code: r, Name: "CUresult"}
	var name, msg uintptr
	if d.cuGetErrorName != 0 && call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&name))) == cudaSuccess {
		e.Name = cString(name)
	}
	if d.cuGetErrorString != 0 && call(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&msg))) == cudaSuccess {
		e.Msg = cString(msg)
	}
	return e
}

// check turns a CUresult into nil or an *Error.
func (d *driver) check(r int, what string) error {
	if r == cudaSuccess {
		return nil
	}
	return d.errorf(r, what)
}

// version is the driver's CUDA version as major*1000 + minor*10.
func (d *driver) version() int {
	var v int32
	call(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v)
}

func (d *driver) attribute(dev int32, attr int) int {
	var v int32
	call(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v)
}

// cString copies a NUL-terminated C string the library owns.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := cPointer(p)
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(base, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cPointer turns an address that C code returned into an unsafe.Pointer.
// The memory is the C library's, never Go's, so the garbage collector has
// nothing to track; reading the word through &p keeps vet's uintptr check
// (meant for Go memory) quiet.
func cPointer(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
