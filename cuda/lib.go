package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// This file is the only place that opens shared libraries. Every foreign
// call goes through call, which uses purego.SyscallN: all CUDA, cuBLAS and
// NVRTC entry points take integers and pointers only, so no reflection is
// needed per call.

// library is one opened shared library and the name it was found under.
type library struct {
	handle uintptr
	path   string
}

// openFirst opens the first library of names that loads (an absolute path
// or a soname the dynamic loader searches for), returning every failure
// when none does.
func openFirst(names []string) (library, error) {
	var fails []string
	for _, n := range names {
		if n == "" {
			continue
		}
		// dlerror's message is the calling thread's: the goroutine must not
		// move to another thread between dlopen and dlerror (under load it
		// did, and the message came back empty).
		runtime.LockOSThread()
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		runtime.UnlockOSThread()
		if err == nil {
			return library{handle: h, path: n}, nil
		}
		msg := err.Error()
		if !strings.Contains(msg, n) {
			msg = n + ": " + cmp.Or(msg, "cannot be opened")
		}
		fails = append(fails, msg)
	}
	return library{}, errors.New(strings.Join(fails, "; "))
}

// searchNames is the list openFirst tries: the file named by the
// environment variable env when set, then the sonames in order (the
// dynamic loader's search path), then the same sonames in the folders
// where CUDA toolkits and Python wheels (PyTorch's nvidia-* packages)
// install them, which are often not on that path.
func searchNames(env string, sonames ...string) []string {
	var names []string
	if p := os.Getenv(env); p != "" {
		names = append(names, p)
	}
	names = append(names, sonames...)
	for _, dir := range libraryDirs() {
		for _, so := range sonames {
			if p := filepath.Join(dir, so); fileExists(p) {
				names = append(names, p)
			}
		}
	}
	return names
}

// libraryDirs are the usual homes of CUDA libraries outside the loader's
// search path.
func libraryDirs() []string {
	dirs := []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current"}
	for _, pat := range []string{
		"/usr/local/cuda-*/lib64",
		"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/lib/python3*/dist-packages/nvidia/*/lib",
		"/opt/conda/lib/python3*/site-packages/nvidia/*/lib",
		os.Getenv("HOME") + "/.local/lib/python3*/site-packages/nvidia/*/lib",
	} {
		m, _ := filepath.Glob(pat)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest version first
		dirs = append(dirs, m...)
	}
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		m, _ := filepath.Glob(v + "/lib/python3*/site-packages/nvidia/*/lib")
		dirs = append(dirs, m...)
	}
	return dirs
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// preloadSiblings opens, globally, the libraries matching pattern in the
// folder of path. NVRTC opens libnvrtc-builtins by soname; when NVRTC comes
// from a folder outside the loader's search path (an unpacked Debian
// package, a Python wheel), loading the builtins first by full path lets
// that lookup find the copy already in the process.
func preloadSiblings(path, pattern string) {
	if !filepath.IsAbs(path) {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), pattern))
	for _, m := range matches {
		purego.Dlopen(m, purego.RTLD_NOW|purego.RTLD_GLOBAL) //nolint:errcheck // best effort
	}
}

// symbol resolves the first of names that lib exports (versioned names
// such as cuMemAlloc_v2 first, the plain name as a fallback).
func (lib library) symbol(names ...string) (uintptr, error) {
	for _, n := range names {
		if p, err := purego.Dlsym(lib.handle, n); err == nil && p != 0 {
			return p, nil
		}
	}
	return 0, fmt.Errorf("cuda: %s exports none of %v", lib.path, names)
}

// bindAll resolves a table of symbols: each entry is a target and the
// names to try. The first missing symbol is reported.
func (lib library) bindAll(table []binding) error {
	for _, b := range table {
		p, err := lib.symbol(b.names...)
		if err != nil {
			if b.optional {
				continue
			}
			return err
		}
		*b.fn = p
	}
	return nil
}

type binding struct {
	fn       *uintptr
	names    []string
	optional bool // absent in some versions; callers check for 0
}

func bind(fn *uintptr, names ...string) binding { return binding{fn: fn, names: names} }

func bindOptional(fn *uintptr, names ...string) binding {
	return binding{fn: fn, names: names, optional: true}
}

// call invokes a C function with integer and pointer arguments and returns
// its int result (CUresult, cublasStatus_t, nvrtcResult are all C ints).
// uintptrescapes keeps the Go memory behind uintptr(unsafe.Pointer(...))
// arguments alive and in place for the duration of the call.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(r))
}

// callPtr is call for a C function that returns a pointer.
//
//go:uintptrescapes
func callPtr(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
