//go:build !(linux || darwin || freebsd)

package main

import "errors"

type openBLAS struct {
	path       string
	setThreads func(n int32)
}

func loadOpenBLAS() (*openBLAS, error) {
	return nil, errors.New("OpenBLAS not found: run-time loading is not supported on this OS")
}

func (o *openBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("unreachable")
}
