package gemm

import (
	"math"
	"unsafe"
)

// The portable kernel's dot products (the generic tier, every CPU off
// amd64). A product of a few rows against a transposed B otherwise takes
// the packed path, which pads one row of A to the tile's four and packs
// all of B for a single use: for batch-1 decode the loops below read B once
// and run 2.5-3.5 × faster in Go (BenchmarkSgemmDecode/generic).
//
// Each row's sum is split over two partial sums, one for even and one for
// odd p, added at the end: eight independent chains over four rows keep
// the adds in flight where one chain a row waits on each add. The bf16
// twin does the same arithmetic on widened weights (exact), so a one-row
// product against bf16 weights gives the float32 product's bits at this
// tier too. Both are written as the same expressions, so a compiler that
// fuses a·b + s into one FMA (Go does on arm64, not on amd64) fuses both
// alike.

// goDotStep is the portable dot kernels' k step (their two partial sums).
const goDotStep = 2

// dot4x1Go is dotKernel1 in Go: out[r] = Σ_{p<k} a[p]·b_r[p] for four rows
// of B ldb bytes apart (0: one row four times); k is even.
func dot4x1Go(k int, a, b *float32, ldb uintptr, out *[4]float32) {
	av := unsafe.Slice(a, k)
	row := func(r uintptr) []float32 {
		return unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(b), r*ldb)), k)
	}
	b0, b1, b2, b3 := row(0), row(1), row(2), row(3)
	var s00, s01, s10, s11, s20, s21, s30, s31 float32
	for p := 1; p < len(av); p += 2 {
		x0, x1 := av[p-1], av[p]
		s00 += x0 * b0[p-1]
		s01 += x1 * b0[p]
		s10 += x0 * b1[p-1]
		s11 += x1 * b1[p]
		s20 += x0 * b2[p-1]
		s21 += x1 * b2[p]
		s30 += x0 * b3[p-1]
		s31 += x1 * b3[p]
	}
	out[0], out[1], out[2], out[3] = s00+s01, s10+s11, s20+s21, s30+s31
}

// dot4x2Go is dotKernel in Go, one row of A at a time: each element is
// dot4x1Go's sum, so a product of two rows gives the bits of two products
// of one (four rows of B are 4·k floats, read again from cache).
func dot4x2Go(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32) {
	var o [4]float32
	dot4x1Go(k, a0, b, ldb, &o)
	out[0], out[2], out[4], out[6] = o[0], o[1], o[2], o[3]
	dot4x1Go(k, a1, b, ldb, &o)
	out[1], out[3], out[5], out[7] = o[0], o[1], o[2], o[3]
}

// dot4x1BF16Go is dot4x1Go over bf16 rows of B (ldb bytes apart), each
// weight widened exactly as it is read.
func dot4x1BF16Go(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32) {
	av := unsafe.Slice(a, k)
	row := func(r uintptr) []uint16 {
		return unsafe.Slice((*uint16)(unsafe.Add(unsafe.Pointer(b), r*ldb)), k)
	}
	b0, b1, b2, b3 := row(0), row(1), row(2), row(3)
	w := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	var s00, s01, s10, s11, s20, s21, s30, s31 float32
	for p := 1; p < len(av); p += 2 {
		x0, x1 := av[p-1], av[p]
		s00 += x0 * w(b0[p-1])
		s01 += x1 * w(b0[p])
		s10 += x0 * w(b1[p-1])
		s11 += x1 * w(b1[p])
		s20 += x0 * w(b2[p-1])
		s21 += x1 * w(b2[p])
		s30 += x0 * w(b3[p-1])
		s31 += x1 * w(b3[p])
	}
	out[0], out[1], out[2], out[3] = s00+s01, s10+s11, s20+s21, s30+s31
}
