package cpu

import "github.com/r1go/r1go/internal/isa"

// attnVector: the CPU runs the AVX-512 kernels.
var attnVector = isa.X86.AVX512F && isa.X86.AVX512VL

// attnAVX512 and attnAVX2 are attendGroup32's kernels at each tier.
var (
	attnAVX512 = &attnKernels{"avx512", packQAVX512, dotsGroupAVX512, axpyGroupF64AVX512, scoresGroupAVX512, argsGroupAVX512, weightsGroupAVX512}
	attnAVX2   = &attnKernels{"avx2", packQAVX2, dotsGroupAVX2, axpyGroupF64AVX2, scoresGroupAVX2, argsGroupAVX2, weightsGroupAVX2}
)

// attnKernelSets lists the sets this CPU runs, best first.
func attnKernelSets() []*attnKernels {
	var ks []*attnKernels
	if attnVector {
		ks = append(ks, attnAVX512)
	}
	if isa.X86.AVX2 && isa.X86.FMA {
		ks = append(ks, attnAVX2)
	}
	return ks
}

// The avx2 tier's grouped kernels (attn_avx2_amd64.s).
//
//go:noescape
func dotsGroupAVX2(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)

//go:noescape
func axpyGroupF64AVX2(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)

//go:noescape
func scoresGroupAVX2(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)

//go:noescape
func argsGroupAVX2(p *float64, arg *float32, n int, m *[8]float64)

//go:noescape
func weightsGroupAVX2(ex *float32, p *float64, n int, sum *[8]float64)

// dotsGroupAVX512 and axpyGroupF64AVX512 are the grouped kernels: up to
// eight query heads sharing a KV head at once (attn_amd64.s).
//
//go:noescape
func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)

//go:noescape
func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)

// scoresGroupAVX512, argsGroupAVX512 and weightsGroupAVX512 are
// attendGroup32's softmax loops, eight heads a vector (attn_amd64.s).
//
//go:noescape
func scoresGroupAVX512(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)

//go:noescape
func argsGroupAVX512(p *float64, arg *float32, n int, m *[8]float64)

//go:noescape
func weightsGroupAVX512(ex *float32, p *float64, n int, sum *[8]float64)

// attnBF16AVX512 and attnBF16AVX2 are attendGroupBF16's kernels at each
// tier.
var (
	attnBF16AVX512 = &attnBF16Kernels{"avx512", func(qp, q []float32, nh, HS int) { packQBF16AVX512(&qp[0], &q[0], nh, HS) },
		dotsGroupBF16AVX512, softmaxGroup32AVX512, axpyOutBF16AVX512}
	attnBF16AVX2 = &attnBF16Kernels{"avx2", packQAVX2, dotsGroupBF16AVX2, softmaxGroup32AVX2, axpyOutBF16AVX2}
)

// attnBF16KernelSets lists the bf16 cache's sets this CPU runs, best
// first.
func attnBF16KernelSets() []*attnBF16Kernels {
	var ks []*attnBF16Kernels
	if attnVector {
		ks = append(ks, attnBF16AVX512)
	}
	if isa.X86.AVX2 && isa.X86.FMA {
		ks = append(ks, attnBF16AVX2)
	}
	return ks
}

// The avx2 tier's kernels against a bf16 cache (attn_bf16_avx2_amd64.s):
// the queries laid out by packQAVX2, a vector the eight heads' value.
//
//go:noescape
func dotsGroupBF16AVX2(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)

//go:noescape
func axpyOutBF16AVX2(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)

//go:noescape
func softmaxGroup32AVX2(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)

// dotsGroupBF16AVX512 and axpyOutBF16AVX512 are attendGroupBF16's
// kernels against a bf16 KV cache (attn_bf16_amd64.s).
//
//go:noescape
func dotsGroupBF16AVX512(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)

//go:noescape
func axpyOutBF16AVX512(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)

// packQBF16AVX512 lays out a group's queries for dotsGroupBF16AVX512.
//
//go:noescape
func packQBF16AVX512(qp, q *float32, nh, hs int)

// softmaxGroup32AVX512 is softmaxGroup32Loops in vector lanes, or false
// when a score is not finite (attn_bf16_amd64.s).
//
//go:noescape
func softmaxGroup32AVX512(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)
