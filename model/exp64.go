package model

import (
	"math"
	"sync"
)

// The float64 e^x of host sampling: SampleToken's exact draw takes every
// e^x with math.Exp's bits, eight lanes at a time where the CPU has
// AVX-512 (exp64_amd64.s, which also holds sumExps's loop over eight rows).

// expNoVector makes exp64Into and the eight-row sums run math.Exp element
// by element (tests, benchmarks).
var expNoVector bool

// scratchPool holds sampling's per-goroutine scratch rows: allocated per
// draw, a 151,936-entry vocabulary's rows would add megabytes of garbage
// per step.
var scratchPool sync.Pool

// getScratch returns a scratch row of n values (contents undefined);
// putScratch gives it back.
func getScratch(n int) *[]float64 {
	if p, ok := scratchPool.Get().(*[]float64); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float64, n)
	return &s
}

func putScratch(p *[]float64) { scratchPool.Put(p) }

// exp64Into sets dst[i] = math.Exp(src[i]) for i < len(src), bit for bit
// (TestExp64IntoBitForBit): eight lanes at a time where the CPU has
// AVX-512, math.Exp for the tail and for lanes outside (−708, 709), which
// take math.Exp's other branches. dst must not overlap src.
func exp64Into(dst, src []float64) {
	dst = dst[:len(src)]
	done := 0
	if exp64Vector && !expNoVector && len(src) >= 8 {
		done = len(src) / 8 * 8
		if exp64AVX512FMA(&dst[0], &src[0], done) {
			for i, x := range src[:done] {
				if !(x > -708 && x < 709) {
					dst[i] = math.Exp(x)
				}
			}
		}
	}
	for i := done; i < len(src); i++ {
		dst[i] = math.Exp(src[i])
	}
}
