package cpu

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// The bf16 KV cache of a rollout copy. A model whose products round their
// inputs to bf16 (LoadOptions.BF16Products) samples as a bf16 inference
// engine does, and such an engine keeps its keys and values in bf16 too:
// NewKVCache gives it a bf16 cache, rounded to nearest (even) as each
// step writes it. The cache then takes half the memory, a decode step
// reads half the bytes of it, and attention runs in float32 (fused
// multiply-adds, sixteen lanes) instead of accumulating the weighted sums
// in float64 as the float32 cache does. That one keeps the policy's own
// decode (a float32 rollout, evaluation, the server) as it was, bit for
// bit; a rollout copy's sampled tokens are scored again by the policy, so
// its attention need only be as close as its bf16 products are.
//
// The arithmetic, in the vector kernels of both tiers (attn_bf16_amd64.s,
// attn_bf16_avx2_amd64.s) and the loops here, which give the same bits:
//   - score of head h and key i: four float32 partial sums, lane j taking
//     the elements c with c mod 8 ∈ {2j, 2j+1} in order through fused
//     multiply-adds, then (s0 + s1) + (s2 + s3);
//   - softmax in float32 (softmaxGroup32Loops and its kernel): the largest
//     score times scale, the float32 exp of each score times scale less
//     it, the sum of those in float64;
//   - output: per head and column, the fused multiply-add of each key's
//     exp with its value in key order, in float32, then times the
//     reciprocal of the sum in float64, rounded to float32.

// attendCachedBF16 is AttentionCached against a bf16 cache (kc, vc):
// keys and values of this step's rows are rounded into it first, then
// each row attends over its slot's positions up to its own.
func attendCachedBF16[F Float](d *Device[F], o, x []F, K, V bf16Buf, starts, slots, pos0, lens []int32, maxLen, NH, KVH, HS int) {
	a := newAttnDims(NH, KVH, HS)
	T := len(x) / a.W
	kvw := KVH * HS
	for j := range lens {
		base := int(slots[j]) * maxLen * kvw
		for i := 0; i < int(lens[j]); i++ {
			t, p := int(starts[j])+i, int(pos0[j])+i
			narrowRow(K[base+p*kvw:][:kvw], x[t*a.W+a.kOff:][:kvw])
			narrowRow(V[base+p*kvw:][:kvw], x[t*a.W+a.vOff:][:kvw])
		}
	}
	scale := 1 / math.Sqrt(float64(HS))
	o32, _ := any(o).([]float32)
	x32, _ := any(x).([]float32)
	kern := attnBF16
	if x32 == nil || attnNoVector || HS%32 != 0 {
		kern = nil
	}
	groupTasks(d, T, NH, KVH, HS, maxLen, starts, slots, pos0, func(w *groupScratch, t, h0, nh, off, n int) {
		if kern != nil {
			attendGroupBF16(kern, o32[t*NH*HS+h0*HS:][:nh*HS], x32[t*a.W+a.qOff+h0*HS:][:nh*HS], K[off:], V[off:], kvw, n, nh, HS, scale, w)
		} else {
			attendGroupBF16Loop(o[t*NH*HS+h0*HS:][:nh*HS], x[t*a.W+a.qOff+h0*HS:][:nh*HS], K[off:], V[off:], kvw, n, nh, HS, scale, w)
		}
	})
}

// narrowRow rounds src into dst, to nearest even.
func narrowRow[F Float](dst []uint16, src []F) {
	if s32, ok := any(src).([]float32); ok {
		for c, v := range s32 {
			dst[c] = bf16.FromFloat32(v)
		}
		return
	}
	for c, v := range src {
		dst[c] = bf16.FromFloat32(float32(v))
	}
}

// attnBF16Kernels is one tier's set of attendGroupBF16's kernels
// (attn_bf16_amd64.s for avx512, attn_bf16_avx2_amd64.s for avx2): the
// loops' arithmetic per head, each set with its own layout of the queries.
type attnBF16Kernels struct {
	name string
	// packQ lays out nh ≤ attnGroup query rows of HS (q) for dots in
	// HS·attnGroup floats, zeros for the heads past nh.
	packQ func(qp, q []float32, nh, HS int)
	// dots: out[8i + h] = the score of head h against the bf16 key at
	// k + i·ldk bytes, for n keys of chunks·8 values. pv: the value rows
	// at the same pitch, asked for into L2 as their keys are read.
	dots func(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)
	// softmax is softmaxGroup32Loops, or false, writing nothing, when a
	// score is not finite.
	softmax func(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)
	// axpyOut: out[h·hs + c] = float32(float64(Σ_i e[8i + h]·v_i[c])·r[h])
	// for h < nh, each sum in key order.
	axpyOut func(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)
}

// attnBF16 is the best set of this CPU (nil: the loops).
var attnBF16 = func() *attnBF16Kernels {
	if ks := attnBF16KernelSets(); len(ks) > 0 {
		return ks[0]
	}
	return nil
}()

// attendGroupBF16 is attendGroupBF16Loop with a set of vector kernels:
// the scores of up to eight heads against each key at once, their
// softmax, and the weighted sums of the value rows, scaled into out.
func attendGroupBF16(kern *attnBF16Kernels, out, q []float32, k, v []uint16, kvw, n, nh, HS int, scale float64, w *groupScratch) {
	const G = attnGroup
	_ = k[(n-1)*kvw+HS-1]
	_ = v[(n-1)*kvw+HS-1]
	chunks := HS / 8
	qp := grow(&w.qp, G*HS)
	kern.packQ(qp, q, nh, HS)
	sc := grow(&w.sc, G*n)
	kern.dots(&qp[0], &k[0], uintptr(kvw)*2, n, chunks, &sc[0], &v[0])
	ex := grow(&w.ex, G*n)
	var sum [G]float64
	if !kern.softmax(&sc[0], &ex[0], n, float32(scale), &expConsts, &sum) {
		softmaxGroup32Loops(sc, ex, n, float32(scale), &sum)
	}
	var r [G]float64
	for h := range r {
		r[h] = 1 / sum[h]
	}
	_ = out[nh*HS-1]
	kern.axpyOut(&out[0], &v[0], uintptr(kvw)*2, &ex[0], n, HS, nh, &r)
}

// attendGroupBF16Loop is one row's attention for nh ≤ 8 query heads
// sharing a KV head against n cached bf16 keys and values (rows kvw
// apart), element by element: the reference of the vector kernels, and
// the path of CPUs without them.
func attendGroupBF16Loop[F Float](out, q []F, k, v []uint16, kvw, n, nh, HS int, scale float64, w *groupScratch) {
	const G = attnGroup
	sc := grow(&w.sc, G*n)
	for i := 0; i < n; i++ {
		kr := k[i*kvw:][:HS]
		for h := 0; h < G; h++ {
			var s [4]float32
			if h < nh {
				for c := 0; c < HS; c++ {
					j := c % 8 / 2
					s[j] = fma32(float32(q[h*HS+c]), bf16.ToFloat32(kr[c]), s[j])
				}
			}
			sc[i*G+h] = (s[0] + s[1]) + (s[2] + s[3])
		}
	}
	ex := grow(&w.ex, G*n)
	var sum [G]float64
	softmaxGroup32Loops(sc, ex, n, float32(scale), &sum)
	acc := grow(&w.acc32, HS)
	for h := 0; h < nh; h++ {
		clear(acc)
		for i := 0; i < n; i++ {
			vr, e := v[i*kvw:][:HS], ex[i*G+h]
			for c := range acc {
				acc[c] = fma32(e, bf16.ToFloat32(vr[c]), acc[c])
			}
		}
		r := 1 / sum[h]
		for c := range acc {
			out[h*HS+c] = F(float32(float64(acc[c]) * r))
		}
	}
}

// softmaxGroup32Loops is the softmax of a bf16 cache's attention, in
// float32 as an inference engine's: for each head h of sc[8i + h] (n
// keys), m = float32(max_i s·scale) (scale > 0, so the largest product is
// the product of the largest score), ex = exp32(float32(s·scale) − m),
// every argument ≤ 0 and the largest 0 exactly, and sum[h] the float64 sum
// of ex in key order. A NaN or an infinity among the scores gives NaNs.
func softmaxGroup32Loops(sc, ex []float32, n int, scale float32, sum *[attnGroup]float64) {
	const G = attnGroup
	var m [G]float32
	for h := range m {
		m[h] = float32(math.Inf(-1))
	}
	for i := range n {
		for h := range G {
			m[h] = max(m[h], sc[i*G+h])
		}
	}
	for h := range m {
		m[h], sum[h] = m[h]*scale, 0
	}
	for i := range n {
		for h := range G {
			e := exp32(float32(sc[i*G+h]*scale) - m[h])
			ex[i*G+h] = e
			sum[h] += float64(e)
		}
	}
}

// fma32 is a·b + c rounded once to float32, as a fused multiply-add
// instruction computes it. The product of two float32 values is exact in
// float64; their sum is rounded there to odd (the last bit set when
// inexact), which leaves enough bits (53 ≥ 24 + 2) for the rounding to
// float32 to be the correct one.
func fma32(a, b, c float32) float32 {
	p, z := float64(a)*float64(b), float64(c)
	s := p + z
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	t := s - p
	e := (p - (s - t)) + (z - t) // s's rounding error, exactly
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++ // away from zero, toward the exact sum
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// bf16Cache returns a bf16 KV cache's buffers, or false for a float32 one;
// a mix is a bug.
func bf16Cache(kc, vc model.Buffer) (bf16Buf, bf16Buf, bool) {
	K, kok := kc.(bf16Buf)
	V, vok := vc.(bf16Buf)
	if kok != vok {
		panic(fmt.Sprintf("cpu: AttentionCached keys in %T, values in %T", kc, vc))
	}
	return K, V, kok
}
