package cpu

import (
	"math"
	"sync"
)

// The float32 exponential of the element-wise ops (the LM head's softmax,
// SwiGLU's sigmoid, attention's probabilities). exp32 is the scalar
// definition; expInto runs it over a slice, sixteen (AVX-512) or eight
// (AVX2) lanes at a time where the CPU has them. The vector kernels do
// exactly exp32's float32 operations in exactly its order, with no fused
// multiply-add, so each lane rounds as the scalar code does: the results
// are bit for bit exp32's (TestExpIntoBitForBit), and switching a loop from
// expF to expInto changes no result of the float32 device.

// expF is e^x: exact math.Exp for float64 (the gradient checks), and for
// float32 a Cody-Waite range reduction with a degree-6 polynomial, within
// 2.5e-7 relative of e^x for x ≤ 0, about 8x faster than math.Exp.
func expF[F Float](x F) F {
	if _, ok := any(x).(float32); !ok {
		return F(math.Exp(float64(x)))
	}
	return F(exp32(float32(x)))
}

// exp32's constants, as the float32 values its arithmetic uses (untyped
// constants meet float32 operands and round to float32 once).
const (
	expLo    = -87.3 // below: 0 (2^-126 is the smallest normal scale)
	expHi    = 80    // above: math.Exp (the scale 2^n would overflow)
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375
	expLn2Lo = -2.12194440e-4
)

// exp32 is e^x for float32. Every product is converted to float32
// explicitly: a conversion forbids the compiler to fuse it with the next
// addition (the Go spec's rule), so the result is the same on every
// platform and GOAMD64 level, and the vector kernels can match it without
// FMA. On amd64 below v3 (the default build) these are the bits of the
// former nested expression; builds that fuse (arm64, GOAMD64=v3) computed
// that expression slightly differently and now compute these.
func exp32(x float32) float32 {
	if x < expLo {
		return 0
	}
	if x > expHi {
		return float32(math.Exp(float64(x)))
	}
	n := float32(math.Floor(float64(float32(x*expLog2e) + 0.5)))
	r := float32(x-float32(n*expLn2Hi)) - float32(n*expLn2Lo)
	p := float32(r * (1.0 / 720))
	p = float32(r * (1.0/120 + p))
	p = float32(r * (1.0/24 + p))
	p = float32(r * (1.0/6 + p))
	p = float32(r * (0.5 + p))
	p = float32(r * (1 + p))
	p = 1 + p
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// expConsts are the vector kernels' constants in the order they load them.
var expConsts = [12]float32{expLog2e, 0.5, expLn2Hi, expLn2Lo,
	1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1, expLo, expHi, 0}

// expInto sets dst[i] = expF(src[i]) for every i < len(src); dst must not
// overlap src (the lanes the kernel reports are redone from src).
func expInto[F Float](dst, src []F) {
	dst = dst[:len(src)]
	if d, ok := any(dst).([]float32); ok {
		exp32Into(d, any(src).([]float32))
		return
	}
	for i, x := range src {
		dst[i] = expF(x)
	}
}

// exp32Into is expInto for float32: the vector kernel over whole vectors,
// exp32 for the tail and for the lanes the kernel does not handle (above
// expHi, NaN), which it reports.
func exp32Into(dst, src []float32) {
	dst = dst[:len(src)]
	done := 0
	if expVector != nil && !expNoVector && len(src) >= expLanes {
		done = len(src) / expLanes * expLanes
		if expVector(&dst[0], &src[0], done, &expConsts) {
			for i, x := range src[:done] {
				if !(x <= expHi) { // above the range, or NaN
					dst[i] = exp32(x)
				}
			}
		}
	}
	for i := done; i < len(src); i++ {
		dst[i] = exp32(src[i])
	}
}

// expNoVector makes exp32Into run exp32 element by element: the
// benchmarks' same-run before/after.
var expNoVector bool

// expKernel is one vector kernel and its lane count.
type expKernel struct {
	run   func(dst, src *float32, n int, c *[12]float32) bool
	lanes int
}

// rowPool holds the element-wise ops' per-goroutine scratch rows: allocated
// per call, a 151,936-entry LM head's rows would add megabytes of garbage
// per step to a heap that the collector, at several GiB live, visits
// seldom.
var rowPool sync.Pool

// getRow returns a scratch row of n values from rowPool (contents
// undefined); putRow gives it back.
func getRow[F Float](n int) *[]F {
	if p, ok := rowPool.Get().(*[]F); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]F, n)
	return &s
}

func putRow[F Float](p *[]F) { rowPool.Put(p) }
