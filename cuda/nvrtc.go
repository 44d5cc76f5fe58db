package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// nvrtc holds the entry points of the NVRTC runtime compiler. NVRTC needs
// no GPU, so kernels compile (and their compile tests run) on any machine
// that has the library.
type nvrtc struct {
	lib library

	nvrtcVersion, nvrtcCreateProgram, nvrtcDestroyProgram, nvrtcCompileProgram uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog                                 uintptr
	nvrtcGetCUBINSize, nvrtcGetCUBIN, nvrtcGetPTXSize, nvrtcGetPTX             uintptr
	nvrtcGetErrorString                                                        uintptr

	major, minor int
}

// ErrNoNVRTC means no NVRTC library could be loaded.
var ErrNoNVRTC = errors.New("cuda: no NVRTC library found")

// nvrtcNames is where NVRTC is looked for: R1GO_NVRTC (a full path, e.g. to
// an unpacked libnvrtc.so.12), then CUDA 13 and 12 sonames.
var nvrtcNames = func() []string {
	return searchNames("R1GO_NVRTC", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
}

var (
	nvrtcOnce sync.Once
	theNVRTC  *nvrtc
	nvrtcErr  error
)

func loadNVRTC() (*nvrtc, error) {
	nvrtcOnce.Do(func() { theNVRTC, nvrtcErr = openNVRTC(nvrtcNames()) })
	return theNVRTC, nvrtcErr
}

func openNVRTC(names []string) (*nvrtc, error) {
	for _, n := range names {
		preloadSiblings(n, "libnvrtc-builtins.so.*")
	}
	lib, err := openFirst(names)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoNVRTC, err)
	}
	c := &nvrtc{lib: lib}
	err = lib.bindAll([]binding{
		bind(&c.nvrtcVersion, "nvrtcVersion"),
		bind(&c.nvrtcCreateProgram, "nvrtcCreateProgram"),
		bind(&c.nvrtcDestroyProgram, "nvrtcDestroyProgram"),
		bind(&c.nvrtcCompileProgram, "nvrtcCompileProgram"),
		bind(&c.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"),
		bind(&c.nvrtcGetProgramLog, "nvrtcGetProgramLog"),
		bind(&c.nvrtcGetCUBINSize, "nvrtcGetCUBINSize"),
		bind(&c.nvrtcGetCUBIN, "nvrtcGetCUBIN"),
		bind(&c.nvrtcGetPTXSize, "nvrtcGetPTXSize"),
		bind(&c.nvrtcGetPTX, "nvrtcGetPTX"),
		bind(&c.nvrtcGetErrorString, "nvrtcGetErrorString"),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNVRTC, err)
	}
	var major, minor int32
	if r := call(c.nvrtcVersion, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); r != 0 {
		return nil, c.errorf(r, "nvrtcVersion")
	}
	c.major, c.minor = int(major), int(minor)
	return c, nil
}

func (c *nvrtc) errorf(r int, what string) error {
	return &Error{Call: what, Code: r, Name: cString(callPtr(c.nvrtcGetErrorString, uintptr(r)))}
}

// version is the NVRTC version as "12.5".
func (c *nvrtc) version() string { return fmt.Sprintf("%d.%d", c.major, c.minor) }

// source is one translation unit and the headers it includes by name.
type source struct {
	name    string   // e.g. "rmsnorm.cu", used in compiler messages
	text    string   // the .cu file
	headers []header // made visible to #include "name"
}

type header struct{ name, text string }

// CompileError is a kernel that NVRTC rejected, with the compiler's log.
type CompileError struct {
	File, Arch string
	Log        string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: NVRTC could not compile %s for %s:\n%s", e.File, e.Arch, strings.TrimSpace(e.Log))
}

// compile turns src into a CUBIN for a real architecture such as "sm_90a"
// (or PTX for a virtual one such as "compute_90").
func (c *nvrtc) compile(src source, arch string, opts []string) ([]byte, error) {
	img, _, err := c.compileLog(src, arch, opts)
	return img, err
}

// compileLog is compile that also returns the compiler's log of a success
// (ptxas's report under --ptxas-options=-v).
func (c *nvrtc) compileLog(src source, arch string, opts []string) ([]byte, string, error) {
	cstr := func(s string) *byte { b := append([]byte(s), 0); return &b[0] }
	hdrText := make([]*byte, len(src.headers))
	hdrName := make([]*byte, len(src.headers))
	for i, h := range src.headers {
		hdrText[i], hdrName[i] = cstr(h.text), cstr(h.name)
	}
	var textPtr, namePtr uintptr
	if len(src.headers) > 0 {
		textPtr, namePtr = uintptr(unsafe.Pointer(&hdrText[0])), uintptr(unsafe.Pointer(&hdrName[0]))
	}
	var prog uintptr
	r := call(c.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(cstr(src.text))),
		uintptr(unsafe.Pointer(cstr(src.name))), uintptr(len(src.headers)), textPtr, namePtr)
	runtime.KeepAlive(hdrText)
	runtime.KeepAlive(hdrName)
	if r != 0 {
		return nil, "", c.errorf(r, "nvrtcCreateProgram")
	}
	defer call(c.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))

	all := append([]string{"--gpu-architecture=" + arch}, opts...)
	optPtrs := make([]*byte, len(all))
	for i, o := range all {
		optPtrs[i] = cstr(o)
	}
	r = call(c.nvrtcCompileProgram, prog, uintptr(len(all)), uintptr(unsafe.Pointer(&optPtrs[0])))
	runtime.KeepAlive(optPtrs)
	if r != 0 {
		log := c.log(prog)
		if log == "" {
			log = c.errorf(r, "nvrtcCompileProgram").Error()
		}
		return nil, "", &CompileError{File: src.name, Arch: arch, Log: log}
	}
	sizeFn, getFn, what := c.nvrtcGetCUBINSize, c.nvrtcGetCUBIN, "nvrtcGetCUBIN"
	if strings.HasPrefix(arch, "compute_") {
		sizeFn, getFn, what = c.nvrtcGetPTXSize, c.nvrtcGetPTX, "nvrtcGetPTX"
	}
	var n uintptr
	if r := call(sizeFn, prog, uintptr(unsafe.Pointer(&n))); r != 0 {
		return nil, "", c.errorf(r, what+"Size")
	}
	if n == 0 {
		return nil, "", fmt.Errorf("cuda: NVRTC produced an empty image for %s (%s)", src.name, arch)
	}
	out := make([]byte, n)
	if r := call(getFn, prog, uintptr(unsafe.Pointer(&out[0]))); r != 0 {
		return nil, "", c.errorf(r, what)
	}
	return out, c.log(prog), nil
}

func (c *nvrtc) log(prog uintptr) string {
	var n uintptr
	if call(c.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&n))) != 0 || n <= 1 {
		return ""
	}
	b := make([]byte, n)
	if call(c.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&b[0]))) != 0 {
		return ""
	}
	return strings.TrimRight(string(b), "\x00")
}
