//go:build linux || darwin || freebsd

package main

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// openBLAS is the peer SGEMM, loaded at run time so the suite builds and
// runs without it.
type openBLAS struct {
	path       string
	sgemm      func(order, transA, transB, m, n, k int32, alpha float32, a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32, beta float32, c unsafe.Pointer, ldc int32)
	setThreads func(n int32)
}

// CBLAS enum values.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// openBLASPaths is where Debian's libopenblas0-pthread puts the library,
// directly and through the BLAS alternatives link.
var openBLASPaths = []string{
	"libopenblas.so.0",
	"/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
	"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
	"libblas.so.3",
	"/usr/lib/x86_64-linux-gnu/libblas.so.3",
	"libopenblas.dylib",
}

func loadOpenBLAS() (*openBLAS, error) {
	var errs []error
	for _, p := range openBLASPaths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := purego.Dlsym(h, "cblas_sgemm"); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if _, err := purego.Dlsym(h, "openblas_set_num_threads"); err != nil {
			errs = append(errs, fmt.Errorf("%s is not OpenBLAS: %w", p, err))
			continue
		}
		o := &openBLAS{path: p}
		purego.RegisterLibFunc(&o.sgemm, h, "cblas_sgemm")
		purego.RegisterLibFunc(&o.setThreads, h, "openblas_set_num_threads")
		return o, nil
	}
	return nil, fmt.Errorf("OpenBLAS not found: %w", errors.Join(errs...))
}

// Sgemm has gemm.Sgemm's meaning; it calls cblas_sgemm in row-major order.
func (o *openBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	t := func(x bool) int32 {
		if x {
			return cblasTrans
		}
		return cblasNoTrans
	}
	o.sgemm(cblasRowMajor, t(transA), t(transB), int32(m), int32(n), int32(k), alpha,
		unsafe.Pointer(&a[0]), int32(lda), unsafe.Pointer(&b[0]), int32(ldb), beta, unsafe.Pointer(&c[0]), int32(ldc))
}
