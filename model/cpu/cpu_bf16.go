package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// bfloat16 storage on the CPU. A frozen model (a reference policy, a
// rollout copy) keeps its weights as bfloat16 at half the memory; the math
// stays float32: every operation that reads a bf16 weight widens it on the
// fly (a bf16 value widens to float32 exactly), so a model whose weights
// were bf16 to begin with computes the same values as its float32 copy.
// Only weights may be bf16: activations, gradients and outputs stay in F.

// bf16Buf is a CPU buffer of bfloat16 bit patterns.
type bf16Buf []uint16

func (b bf16Buf) Len() int                      { return len(b) }
func (b bf16Buf) Slice(off, n int) model.Buffer { return b[off : off+n : off+n] }

// AllocAs returns n zero-filled values of kind (model.Storage): bf16
// (AllocBF16), bf16 weights with bf16 products (AllocBF16Products), a
// rollout copy's KV cache (AllocKVArena), kept logits (float32, Alloc's:
// the LM head keeps logits in any float32 buffer) or a rollout copy's
// decode logits (engineLogits, on the float32 device). The CPU computes in
// float32: it has no StoreCompute of its own. n < 0 allocates nothing.
func (d *Device[F]) AllocAs(n int, kind model.StorageKind) (model.Buffer, bool) {
	var alloc func(int) model.Buffer
	switch kind {
	case model.StoreBF16:
		alloc = d.AllocBF16
	case model.StoreBF16Products:
		alloc = d.AllocBF16Products
	case model.StoreKVArena:
		alloc = d.AllocKVArena
	case model.StoreKeptLogits:
		alloc = d.Alloc
	case model.StoreEngineLogits:
		if _, f32 := any(F(0)).(float32); !f32 {
			return nil, false
		}
		alloc = func(n int) model.Buffer { d.collectFreed(n); return engineLogits(make([]float32, n)) }
	default:
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	return alloc(n), true
}

// AllocBF16 returns a zero-filled bfloat16 buffer, in huge pages where
// it is large, R1GO_HUGEPAGES=1 asks and the kernel lends them (package
// pages).
func (d *Device[F]) AllocBF16(n int) model.Buffer {
	d.collectFreed(n)
	return bf16Buf(pages.Alloc[uint16](n, pages.On))
}

// KVCacheHugePages puts a rollout copy's bf16 KV cache (on the CPU, one
// buffer for every layer) in transparent huge pages, where Linux lends
// them and the cache is at least pages.MinBytes: R1GO_HUGEPAGES=1, as for
// the copy's weights (pages.On). A decode step's attention reads every
// slot's keys and values of every layer, a few KiB here and there over
// tens of MiB, and in 4 KiB pages most of those reads miss the TLB: the
// 24 layers of BenchmarkAttentionDecodeStep05B took 0.90 × the time in
// huge pages on this project's Zen 4 VM. Off by default all the same: in
// the rollout there (benchmarks/cpu -step_kvpages, taking turns) the
// decode was no faster, 311 and 349 tok/s against 322 and 355 (medians of
// three), and on the GPU machine's Xeon huge pages read slower on 2 cores
// (package pages). Read when a cache is made.
var KVCacheHugePages = pages.On

// AllocKVArena returns a zero-filled bf16 buffer for a rollout copy's
// whole KV cache, in huge pages where KVCacheHugePages asks.
func (d *Device[F]) AllocKVArena(n int) model.Buffer {
	d.collectFreed(n)
	return bf16Buf(pages.Alloc[uint16](n, KVCacheHugePages))
}

// IsBF16 says whether b holds bfloat16 values.
func IsBF16(b model.Buffer) bool { _, ok := asBF16(b); return ok }

// bf16DotBuf is a bf16 buffer whose products may round their float32
// inputs to bf16 and use the CPU's bf16 dot product (LoadOptions.
// BF16Products): a rollout copy's weights. Everything else reads it as a
// bf16Buf.
type bf16DotBuf []uint16

func (b bf16DotBuf) Len() int                      { return len(b) }
func (b bf16DotBuf) Slice(off, n int) model.Buffer { return b[off : off+n : off+n] }

// asBF16 returns the bit patterns of either kind of bf16 buffer.
func asBF16(b model.Buffer) (bf16Buf, bool) {
	switch h := b.(type) {
	case bf16Buf:
		return h, true
	case bf16DotBuf:
		return bf16Buf(h), true
	}
	return nil, false
}

// AllocBF16Products returns a zero-filled bf16 buffer whose products round
// their other operand to bf16 where the CPU has a bf16 dot product: a
// rollout copy's weights, which every decode step streams from memory,
// in huge pages where R1GO_HUGEPAGES=1 asks and the kernel lends them
// (package pages).
func (d *Device[F]) AllocBF16Products(n int) model.Buffer {
	d.collectFreed(n)
	return bf16DotBuf(pages.Alloc[uint16](n, pages.On))
}

// HostFloat64 returns the memory behind a buffer of the float64 device
// (NewFloat64), for tests that read values in place; false for any other.
func HostFloat64(b model.Buffer) ([]float64, bool) { s, ok := b.(cpuBuf[float64]); return s, ok }

// HostFloat32 returns the memory behind a float32 CPU buffer, for
// transports that read and write host memory (MPI); false for any other
// buffer.
func HostFloat32(b model.Buffer) ([]float32, bool) {
	if e, ok := b.(engineLogits); ok {
		return e, true
	}
	s, ok := b.(cpuBuf[float32])
	return s, ok
}

// Host is the memory behind a float32 or bfloat16 buffer of this device
// (model.HostMemory): a zero-length buffer reads as an empty, non-nil
// slice.
func (d *Device[F]) Host(b model.Buffer) (f32 []float32, bf16 []uint16) {
	if f, ok := HostFloat32(b); ok {
		return nonNil(f), nil
	}
	if h, ok := asBF16(b); ok {
		return nil, nonNil(h)
	}
	return nil, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// widenInto sets dst[i] = bf16.ToFloat32(src[i]) (len(src) values), sixteen or
// eight at a time where the tier has a kernel: the same exact values.
func widenInto(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	done := 0
	if widenVector != nil && !widenNoVector {
		if done = len(src) / widenLanes * widenLanes; done > 0 {
			widenVector(&dst[0], &src[0], done)
		}
	}
	for i := done; i < len(src); i++ {
		dst[i] = bf16.ToFloat32(src[i])
	}
}

// widenNoVector turns the kernel off (tests).
var widenNoVector bool

// narrowStochastic rounds f to one of its two bf16 neighbours with the
// probability that makes the result unbiased; r supplies 16 random bits.
// Optimizer moments stored as bf16 need it: with round-to-nearest an
// update smaller than half a bf16 step (β₂ = 0.999 gives 0.001·(g² − v))
// would never change the stored value.
func narrowStochastic(f float32, r uint32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff >= 0x7f800000 {
		return bf16.FromFloat32(f)
	}
	b += r & 0xffff
	return uint16(b >> 16)
}

// vec returns a small vector operand (a norm weight, a bias) as []F,
// widening a bf16 one into a pooled row, which putVec gives back (nil:
// the operand itself). Fresh slices were 73 allocations a decode step of
// the 0.5B bf16 rollout copy, 0.3-0.4 s of its 12.5 s of 128 steps on
// this project's Zen 4 (CPU profile of benchmarks/cpu's rollout).
func vec[F Float](b model.Buffer) ([]F, *[]F) {
	h, ok := asBF16(b)
	if !ok {
		return buf[F](b), nil
	}
	p := getRow[F](len(h))
	out := *p
	if o32, ok := any(out).([]float32); ok {
		widenInto(o32, h)
		return out, p
	}
	for i, v := range h {
		out[i] = F(bf16.ToFloat32(v))
	}
	return out, p
}

// putVec gives back vec's pooled row, if any.
func putVec[F Float](p *[]F) {
	if p != nil {
		putRow(p)
	}
}

// bf16Scratch holds float32 panels of widened weights between calls.
var bf16Scratch = sync.Pool{New: func() any { s := make([]float32, 0); return &s }}

// panelFloats is the size of one widened panel of B: 256 K floats (1 MiB)
// fit the L2 cache and amortise the packing of A over ≥ 54 columns at
// the widest projection (k = 4864).
const panelFloats = 1 << 18

// wideRows and wideFloats: above wideRows rows of A, B is widened in
// panels of up to wideFloats (64 MiB: a whole gate-up projection of the
// 0.5B and 1.5B shapes, or one 4,096-entry chunk of the LM head), so A is
// packed once per product rather than once per 1 MiB panel.
const (
	wideRows   = 64
	wideFloats = 1 << 24
)

// gemmBF16 is Gemm with a bf16 B (a weight matrix): B is widened one panel
// of columns of op(B) at a time into a float32 scratch and multiplied by the
// float32 kernels. Each element of C is computed by one call over the full
// k, as in the float32 path.
func (d *Device[F]) gemmBF16(transA, transB bool, m, n, k int, alpha float32, A []F, lda int, B bf16Buf, ldb int, beta float32, C []F, ldc int) {
	if a32, ok := any(A).([]float32); ok && transB && !transA && m <= gemm.BF16Rows {
		// Decode: dot products straight from the bf16 rows, half the bytes.
		gemm.SgemmBF16TransB(m, n, k, alpha, a32, lda, B, ldb, beta, any(C).([]float32), ldc, d.threads)
		return
	}
	// Whole 32-column panels of the packed kernels: a ragged panel of 292
	// columns ended in a 4-column edge tile that cost a full tile (10 % of
	// a reference's scoring). Each element is the same sum either way.
	// A product of many rows (scoring, prefill) widens up to wideFloats
	// of B at once: each panel packs the whole of A again, which at a
	// 4,096-token micro-batch cost more than the widening.
	limit := panelFloats
	if m > wideRows {
		limit = wideFloats
	}
	nb := min(n, max(32, limit/max(k, 1)&^31))
	sp := bf16Scratch.Get().(*[]float32)
	defer bf16Scratch.Put(sp)
	if cap(*sp) < nb*k {
		*sp = make([]float32, nb*k)
	}
	s := (*sp)[:nb*k]
	for j0 := 0; j0 < n; j0 += nb {
		w := min(nb, n-j0)
		if transB { // B is [n, k]: rows j0..j0+w are the panel, laid [w, k]
			d.parallel(w, 8, func(lo, hi int) {
				for j := lo; j < hi; j++ {
					widenInto(s[j*k:(j+1)*k], B[(j0+j)*ldb:(j0+j)*ldb+k])
				}
			})
		} else { // B is [k, n]: columns j0..j0+w, laid [k, w]
			d.parallel(k, 64, func(lo, hi int) {
				for p := lo; p < hi; p++ {
					widenInto(s[p*w:(p+1)*w], B[p*ldb+j0:p*ldb+j0+w])
				}
			})
		}
		ldp := k
		if !transB {
			ldp = w
		}
		if a32, ok := any(A).([]float32); ok {
			gemm.Sgemm(transA, transB, m, w, k, alpha, a32, lda, s[:w*k], ldp, beta, any(C).([]float32)[j0:], ldc)
			continue
		}
		p64 := make([]F, w*k)
		for i := range p64 {
			p64[i] = F(s[i])
		}
		cs := C[j0:]
		d.parallel(m, 1, func(lo, hi int) {
			naiveGemm(transA, transB, lo, hi, w, k, alpha, A, lda, p64, ldp, beta, cs, ldc)
		})
	}
}

// embeddingBF16 copies widened rows of a bf16 table.
func (d *Device[F]) embeddingBF16(o []F, ids []int32, w bf16Buf, C int) {
	V := len(w) / C
	d.parallel(len(ids), 64, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			id := int(ids[t])
			if id < 0 || id >= V {
				panic(fmt.Sprintf("cpu: token id %d at position %d outside the vocabulary [0, %d)", id, t, V))
			}
			dst := o[t*C : (t+1)*C]
			for c, h := range w[id*C : (id+1)*C] {
				dst[c] = F(bf16.ToFloat32(h))
			}
		}
	})
}

// adamWBF16 is AdamW with both moments stored as bf16, rounded
// stochastically: the random bits hash the element index and the step, so
// a run is reproducible and every element draws independently.
func (d *Device[F]) adamWBF16(P, G []F, M, V bf16Buf, hp model.AdamWParams) {
	if len(G) != len(P) || len(M) != len(P) || len(V) != len(P) {
		panic("cpu: AdamW buffers of different lengths")
	}
	b1, b2 := float64(hp.Beta1), float64(hp.Beta2)
	c1 := 1 - math.Pow(b1, float64(hp.Step))
	c2 := 1 - math.Pow(b2, float64(hp.Step))
	lr, eps, wd, gs := float64(hp.LR), float64(hp.Eps), float64(hp.WeightDecay), float64(hp.GradScale)
	seed := uint64(hp.Step) * 0x9e3779b97f4a7c15
	d.parallel(len(P), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := float64(G[i]) * gs
			mi := b1*float64(bf16.ToFloat32(M[i])) + (1-b1)*gi
			vi := b2*float64(bf16.ToFloat32(V[i])) + (1-b2)*gi*gi
			r := mix64(seed ^ uint64(i))
			M[i], V[i] = narrowStochastic(float32(mi), uint32(r)), narrowStochastic(float32(vi), uint32(r>>32))
			pi := float64(P[i])
			P[i] = F(pi - lr*((mi/c1)/(math.Sqrt(vi/c2)+eps)+wd*pi))
		}
	})
}

// mix64 is the splitmix64 finaliser: a well-spread hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
