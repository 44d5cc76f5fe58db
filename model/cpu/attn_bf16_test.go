package cpu

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// fma32 rounds a·b + c once, to nearest even: checked against the exact
// value in big.Float for random operands and for sums that cancel or sit
// next to a tie, where a rounding in float64 first would be wrong.
func TestFMA32Exact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(256).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(256).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(256).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	bad := 0
	for i := 0; i < 200000; i++ {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64()*math.Exp2(float64(rng.IntN(40)-20)))
		var c float32
		switch i % 4 {
		case 0:
			c = float32(rng.NormFloat64())
		case 1: // cancels most of the product
			c = -float32(float64(a) * float64(b))
		case 2: // the product plus half an ulp of c, give or take a tiny bit
			c = float32(rng.NormFloat64()) * 1024
			half := math.Float32frombits(math.Float32bits(c)&0x7f800000) * 0x1p-24
			a, b = half, 1+float32(rng.IntN(3)-1)*0x1p-23
		default: // c far below the product: only its sign decides a tie
			c = float32(rng.NormFloat64()) * 0x1p-40
		}
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			if bad++; bad <= 5 {
				t.Errorf("fma32(%g, %g, %g) = %g, exact %g", a, b, c, got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 200000 wrong", bad)
	}
	if got := fma32(float32(math.Inf(1)), 1, 1); !math.IsInf(float64(got), 1) {
		t.Errorf("fma32(+Inf, 1, 1) = %g", got)
	}
	if got := fma32(3e38, 3e38, 0); !math.IsInf(float64(got), 1) {
		t.Errorf("fma32 overflow = %g, want +Inf", got)
	}
}

// cachedCase runs AttentionCached for chunks of one and several tokens
// at different cache positions (5 slots of 300) against a cache made with
// alloc (float32 or bf16), from random keys and values (bf16 values
// already where round is set, so that either cache holds the same), and
// returns the output and the cache.
func cachedCase(d *Device[float32], rng *rand.Rand, HS, NH, KVH int, alloc func(n int) model.Buffer, round bool) ([]float32, model.Buffer, model.Buffer) {
	const slots, maxLen = 5, 300
	W := (NH + 2*KVH) * HS
	lens := []int32{1, 3, 1, 7, 1}
	pos0 := []int32{0, 17, 255, 100, 4}
	sl := []int32{4, 0, 2, 1, 3}
	T := 0
	for _, n := range lens {
		T += int(n)
	}
	qkv := randF32(rng, T*W, 3)
	K0, V0 := randF32(rng, slots*maxLen*KVH*HS, 1), randF32(rng, slots*maxLen*KVH*HS, 1)
	if round {
		for _, x := range [][]float32{K0, V0} {
			for i, v := range x {
				x[i] = bf16.ToFloat32(bf16.FromFloat32(v))
			}
		}
		for r := 0; r < T; r++ {
			kv := qkv[r*W+NH*HS:][:2*KVH*HS]
			for i, v := range kv {
				kv[i] = bf16.ToFloat32(bf16.FromFloat32(v))
			}
		}
	}
	K, V := alloc(len(K0)), alloc(len(V0))
	d.Upload(K, K0)
	d.Upload(V, V0)
	out := make(cpuBuf[float32], T*NH*HS)
	d.AttentionCached(out, cpuBuf[float32](qkv), nil, K, V, sl, pos0, lens, maxLen, NH, KVH, HS, 0)
	return out, K, V
}

// cachedShapes are head sizes of 32, 48 (a bf16 cache's loops only), 64
// and 128, and groups of 1, 3, 7 (Qwen2.5-0.5B), 8 and 9 query heads
// a KV head (9: two passes of the eight-wide kernels, the second with one
// head).
var cachedShapes = []struct{ HS, NH, KVH int }{
	{32, 6, 2}, {64, 6, 2}, {128, 6, 2}, {48, 14, 2}, {64, 14, 2}, {64, 8, 8}, {32, 16, 2}, {64, 18, 2},
}

// Against a bf16 cache every set of vector kernels this CPU runs gives
// the loops' bits (cachedShapes; an AVX-512 machine checks the avx2
// tier's too), and the cache holds the step's keys and values rounded to
// nearest.
func TestAttentionCachedBF16BitForBitLoops(t *testing.T) {
	if len(attnBF16KernelSets()) == 0 {
		t.Skip("no vector attention kernels on this CPU")
	}
	d := &Device[float32]{threads: 2}
	was := attnBF16
	defer func() { attnBF16 = was }()
	for _, kern := range attnBF16KernelSets() {
		attnBF16 = kern
		for i, c := range cachedShapes {
			what := fmt.Sprintf("%s: HS %d, %d heads, %d KV heads", kern.name, c.HS, c.NH, c.KVH)
			vec, Kv, Vv := cachedCase(d, rand.New(rand.NewPCG(31, uint64(i))), c.HS, c.NH, c.KVH, d.AllocBF16, false)
			attnNoVector = true
			ref, Kr, Vr := cachedCase(d, rand.New(rand.NewPCG(31, uint64(i))), c.HS, c.NH, c.KVH, d.AllocBF16, false)
			attnNoVector = false
			sameBits(t, what+": out", vec, ref)
			for j, b := range []model.Buffer{Kv, Vv, Kr, Vr} {
				if _, ok := b.(bf16Buf); !ok {
					t.Fatalf("%s: cache buffer %d is %T", what, j, b)
				}
			}
			// The rounded cache against the float32 one written from the same
			// random state: every value is its float32 twin rounded to nearest.
			_, K32, V32 := cachedCase(d, rand.New(rand.NewPCG(31, uint64(i))), c.HS, c.NH, c.KVH, d.Alloc, false)
			for j, pair := range [][2]model.Buffer{{Kv, K32}, {Vv, V32}} {
				h, f := pair[0].(bf16Buf), pair[1].(cpuBuf[float32])
				for e := range h {
					if h[e] != bf16.FromFloat32(f[e]) {
						t.Fatalf("%s: cache %d value %d is %#04x, the float32 cache's %g rounds to %#04x", what, j, e, h[e], f[e], bf16.FromFloat32(f[e]))
					}
				}
			}
		}
	}
}

// The bf16 cache's attention against the float32 cache's (float64 sums)
// given the same rounded keys and values: float32 sums of at most 300
// terms of weights in [0, 1] keep |Δout| ≤ 2⁻¹⁶·max|v| (n·u·max|v| bounds
// it at 300·2⁻²⁴ ≈ 2⁻¹⁵·⁸, seen far below); against the unrounded cache,
// rounding keys and values to bf16 moves the output by less than 2⁻⁶·max|v|
// here (2⁻⁹ relative per value, the scores' error through the softmax).
func TestAttentionCachedBF16Accuracy(t *testing.T) {
	d := &Device[float32]{threads: 2}
	for i, c := range cachedShapes {
		what := fmt.Sprintf("HS %d, %d heads, %d KV heads", c.HS, c.NH, c.KVH)
		run := func(alloc func(int) model.Buffer, round bool) ([]float32, model.Buffer) {
			out, _, V := cachedCase(d, rand.New(rand.NewPCG(41, uint64(i))), c.HS, c.NH, c.KVH, alloc, round)
			return out, V
		}
		got, V16 := run(d.AllocBF16, true)
		same, _ := run(d.Alloc, true)
		gotRounding, _ := run(d.AllocBF16, false)
		plain, _ := run(d.Alloc, false)
		var maxV float64
		for _, h := range V16.(bf16Buf) {
			maxV = max(maxV, math.Abs(float64(bf16.ToFloat32(h))))
		}
		var dSame, dPlain float64
		for j := range got {
			dSame = max(dSame, math.Abs(float64(got[j]-same[j])))
			dPlain = max(dPlain, math.Abs(float64(gotRounding[j]-plain[j])))
		}
		if dSame == 0 && c.HS%32 == 0 && attnBF16 != nil {
			t.Errorf("%s: the bf16 cache gave the float32 cache's bits: are its float32 sums in use?", what)
		}
		if dSame > 0x1p-16*maxV {
			t.Errorf("%s: |bf16 cache − float32 cache of the same values| = %g > 2⁻¹⁶·%g", what, dSame, maxV)
		}
		if dPlain > 0x1p-6*maxV {
			t.Errorf("%s: |bf16 cache − unrounded float32 cache| = %g > 2⁻⁶·%g", what, dPlain, maxV)
		}
		t.Logf("%s: vs the same values %.3g, vs unrounded %.3g (max |v| %.3g)", what, dSame, dPlain, maxV)
	}
}

// The float64 device against a bf16 cache takes the loops, which round its
// queries to float32 first: from float32 inputs, the float32 device's bits.
func TestAttentionCachedBF16Float64Device(t *testing.T) {
	d32, d64 := &Device[float32]{threads: 2}, &Device[float64]{threads: 2}
	const HS, NH, KVH, slots, maxLen = 64, 14, 2, 3, 40
	W := (NH + 2*KVH) * HS
	lens, pos0, sl := []int32{1, 4, 1}, []int32{9, 0, 30}, []int32{2, 0, 1}
	T := 6
	rng := rand.New(rand.NewPCG(51, 52))
	qkv32 := randF32(rng, T*W, 2)
	kv0 := randF32(rng, slots*maxLen*KVH*HS, 1)
	qkv64 := make([]float64, len(qkv32))
	for i, v := range qkv32 {
		qkv64[i] = float64(v)
	}
	K32, V32 := d32.AllocBF16(len(kv0)), d32.AllocBF16(len(kv0))
	K64, V64 := d64.AllocBF16(len(kv0)), d64.AllocBF16(len(kv0))
	for _, b := range []model.Buffer{K32, V32, K64, V64} {
		h, _ := asBF16(b)
		for i, v := range kv0 {
			h[i] = bf16.FromFloat32(v)
		}
	}
	out32, out64 := make(cpuBuf[float32], T*NH*HS), make(cpuBuf[float64], T*NH*HS)
	attnNoVector = true
	d32.AttentionCached(out32, cpuBuf[float32](qkv32), nil, K32, V32, sl, pos0, lens, maxLen, NH, KVH, HS, 0)
	attnNoVector = false
	d64.AttentionCached(out64, cpuBuf[float64](qkv64), nil, K64, V64, sl, pos0, lens, maxLen, NH, KVH, HS, 0)
	for i := range out32 {
		if float64(out32[i]) != out64[i] {
			t.Fatalf("output %d: float64 device %v, float32 device %v", i, out64[i], out32[i])
		}
	}
}

// Each softmax kernel (softmaxGroup32AVX512, softmaxGroup32AVX2) gives
// softmaxGroup32Loops' bits for odd and even key counts and scores from
// tiny to near float32's largest (where a fused s·scale − m would leave
// the largest weight far from 1); each head's largest weight is exactly
// 1. A NaN or an infinity makes it refuse, writing nothing, and the loops
// give NaN weights for a NaN.
func TestSoftmaxGroup32Kernel(t *testing.T) {
	if len(attnBF16KernelSets()) == 0 {
		t.Skip("no vector attention kernels on this CPU")
	}
	for _, kern := range attnBF16KernelSets() {
		t.Run(kern.name, func(t *testing.T) { softmaxGroup32SameBits(t, kern.softmax) })
	}
}

func softmaxGroup32SameBits(t *testing.T, softmax func(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) bool) {
	const G = attnGroup
	rng := rand.New(rand.NewPCG(61, 62))
	for _, n := range []int{1, 2, 3, 16, 17, 129, 300} {
		for _, mag := range []float64{1e-3, 1, 30, 1e30} {
			what := fmt.Sprintf("n %d, scores ~%g", n, mag)
			sc := make([]float32, G*n)
			for i := range sc {
				sc[i] = float32(rng.NormFloat64() * mag)
			}
			want, got := make([]float32, G*n), make([]float32, G*n)
			var sumWant, sumGot [G]float64
			softmaxGroup32Loops(sc, want, n, 0.125, &sumWant)
			if !softmax(&sc[0], &got[0], n, 0.125, &expConsts, &sumGot) {
				t.Fatalf("%s: the kernel refused finite scores", what)
			}
			sameBits(t, what, got, want)
			for h := range G {
				if sumGot[h] != sumWant[h] {
					t.Fatalf("%s: head %d sum %v, loops %v", what, h, sumGot[h], sumWant[h])
				}
				top := 0
				for i := range n {
					if sc[i*G+h] > sc[top*G+h] {
						top = i
					}
				}
				if got[top*G+h] != 1 || sumGot[h] < 1 {
					t.Fatalf("%s: head %d's largest score has weight %v, sum %v", what, h, got[top*G+h], sumGot[h])
				}
			}
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, n := range []int{1, 5, 6} {
			sc := make([]float32, G*n)
			for i := range sc {
				sc[i] = float32(rng.NormFloat64())
			}
			sc[(n-1)*G+3] = bad // the last key: the odd count's tail, or the last pair
			ex := make([]float32, G*n)
			for i := range ex {
				ex[i] = -7
			}
			var sum [G]float64
			if softmax(&sc[0], &ex[0], n, 0.125, &expConsts, &sum) {
				t.Fatalf("n %d: the kernel took a score of %v", n, bad)
			}
			for i, e := range ex {
				if e != -7 {
					t.Fatalf("n %d, score %v: the refusing kernel wrote ex[%d] = %v", n, bad, i, e)
				}
			}
			if math.IsNaN(float64(bad)) {
				softmaxGroup32Loops(sc, ex, n, 0.125, &sum)
				if !math.IsNaN(sum[3]) || !math.IsNaN(float64(ex[3])) {
					t.Fatalf("n %d: a NaN score gave head 3 weights %v, sum %v", n, ex[3], sum[3])
				}
			}
		}
	}
}
