package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The element-wise ops that take e^x through the vector expInto give, on
// the float32 device, the bits of their former element-by-element loops
// (kept below as the reference): the default run does not move.

func TestLMHeadBitForBitScalar(t *testing.T) {
	d := &Device[float32]{threads: 2}
	rng := rand.New(rand.NewPCG(5, 6))
	const T, C, V = 7, 24, 4099 // V: one whole chunk and a 3-entry one, neither a lane multiple
	h, w := randF32(rng, T*C, 1), randF32(rng, V*C, 3)
	w[5*C] = 200 // a logit far above the rest: most lanes underflow
	targets := []int32{0, 5, 4098, -1, 17, 4096, 9}
	lp, ent, lse := make(cpuBuf[float32], T), make(cpuBuf[float32], T), make(cpuBuf[float32], T)
	d.LMHead(lp, ent, lse, nil, cpuBuf[float32](h), cpuBuf[float32](w), targets, T, C, V)

	// Reference: the whole [T, V] logits by the same Gemm, the former loop
	// per chunk, combined as LMHead combines chunks.
	z := make(cpuBuf[float32], T*V)
	d.Gemm(false, true, T, V, C, 1, cpuBuf[float32](h), C, cpuBuf[float32](w), C, 0, z, V)
	for i := range T {
		mx, s, sv := math.Inf(-1), 0.0, 0.0
		for v0 := 0; v0 < V; v0 += headChunk {
			m := min(headChunk, V-v0)
			chunk := z[i*V+v0 : i*V+v0+m]
			cm := math.Inf(-1)
			for _, v := range chunk {
				cm = math.Max(cm, float64(v))
			}
			nm := math.Max(mx, cm)
			r := math.Exp(mx - nm)
			s, sv = s*r, sv*r
			for _, v := range chunk {
				e := float64(expF(float32(float64(v) - nm)))
				s += e
				sv += e * float64(v)
			}
			mx = nm
		}
		l := mx + math.Log(s)
		if want := float32(l); math.Float32bits(lse[i]) != math.Float32bits(want) {
			t.Fatalf("row %d: lse %g, former loop %g", i, lse[i], want)
		}
		if want := float32(l - sv/s); math.Float32bits(ent[i]) != math.Float32bits(want) {
			t.Fatalf("row %d: entropy %g, former loop %g", i, ent[i], want)
		}
		if y := targets[i]; y >= 0 {
			if want := float32(float64(z[i*V+int(y)]) - l); math.Float32bits(lp[i]) != math.Float32bits(want) {
				t.Fatalf("row %d: logprob %g, former loop %g", i, lp[i], want)
			}
		}
	}

	// Backward: the former per-logit loop, then the same two products.
	glp, gent := randF32(rng, T, 1), randF32(rng, T, 1)
	dh, dw := make(cpuBuf[float32], T*C), make(cpuBuf[float32], V*C)
	d.LMHeadBackward(dh, dw, cpuBuf[float32](glp), cpuBuf[float32](gent), nil, cpuBuf[float32](h), cpuBuf[float32](w), lse, ent, targets, T, C, V)
	wantDh, wantDw := make(cpuBuf[float32], T*C), make(cpuBuf[float32], V*C)
	for v0 := 0; v0 < V; v0 += headChunk {
		m := min(headChunk, V-v0)
		g := make(cpuBuf[float32], T*m)
		for i := range T {
			l, ez := float64(lse[i]), float64(lse[i])-float64(ent[i])
			gl, ge := float64(glp[i]), float64(gent[i])
			if targets[i] < 0 {
				gl = 0
			}
			y := int(targets[i]) - v0
			for v := range m {
				zv := z[i*V+v0+v]
				p := float64(expF(float32(float64(zv) - l)))
				gg := -gl*p - ge*p*(float64(zv)-ez)
				if v == y {
					gg += gl
				}
				g[i*m+v] = float32(gg)
			}
		}
		beta := float32(1)
		if v0 == 0 {
			beta = 0
		}
		d.Gemm(false, false, T, C, m, 1, g, m, cpuBuf[float32](w[v0*C:(v0+m)*C]), C, beta, wantDh, C)
		d.Gemm(true, false, m, C, T, 1, g, m, cpuBuf[float32](h), C, 1, wantDw[v0*C:(v0+m)*C], C)
	}
	for i := range dh {
		if math.Float32bits(dh[i]) != math.Float32bits(wantDh[i]) {
			t.Fatalf("dh[%d] = %g, former loop %g", i, dh[i], wantDh[i])
		}
	}
	for i := range dw {
		if math.Float32bits(dw[i]) != math.Float32bits(wantDw[i]) {
			t.Fatalf("dw[%d] = %g, former loop %g", i, dw[i], wantDw[i])
		}
	}
}

func TestSwiGLUBitForBitScalar(t *testing.T) {
	d := &Device[float32]{threads: 2}
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, I = 19, 37
	gu := randF32(rng, rows*2*I, 4)
	gu[3] = -95 // e^95: the kernel hands the lane back to exp32
	gu[4] = 100
	gu[5] = float32(math.Inf(-1))
	out := make(cpuBuf[float32], rows*I)
	d.SwiGLU(out, cpuBuf[float32](gu), rows, I)
	dout := randF32(rng, rows*I, 1)
	dgu := make(cpuBuf[float32], rows*2*I)
	d.SwiGLUBackward(dgu, cpuBuf[float32](dout), cpuBuf[float32](gu), rows, I)
	for t2 := range rows {
		for i := range I {
			g, u, gy := float64(gu[t2*2*I+i]), float64(gu[t2*2*I+I+i]), float64(dout[t2*I+i])
			want := float32(g / (1 + float64(expF(float32(-g)))) * u)
			if got := out[t2*I+i]; !sameFloat(got, want) {
				t.Fatalf("SwiGLU[%d, %d] = %g, former loop %g", t2, i, got, want)
			}
			s := 1 / (1 + float64(expF(float32(-g))))
			wg, wu := float32(gy*u*s*(1+g*(1-s))), float32(gy*g*s)
			if got := dgu[t2*2*I+i]; !sameFloat(got, wg) {
				t.Fatalf("d gate[%d, %d] = %g, former loop %g", t2, i, got, wg)
			}
			if got := dgu[t2*2*I+I+i]; !sameFloat(got, wu) {
				t.Fatalf("d up[%d, %d] = %g, former loop %g", t2, i, got, wu)
			}
		}
	}
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

// runBoth runs f with exp32Into's vector kernel and again element by
// element (expNoVector: expF's former loops) and returns both results.
func runBoth[T any](f func() T) (vector, scalar T) {
	defer func() { expNoVector = false }()
	expNoVector = false
	vector = f()
	expNoVector = true
	scalar = f()
	return
}

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s[%d] = %g with the vector exp, %g element by element", what, i, a[i], b[i])
		}
	}
}

// Attention's forward and backward on the float32 device: the same bits
// with the vector exp as element by element, over sequences of several
// blocks.
func TestAttentionBitForBitScalar(t *testing.T) {
	d := &Device[float32]{threads: 2}
	rng := rand.New(rand.NewPCG(9, 10))
	const NH, KVH, HS = 4, 2, 16
	seqs := []int32{0, 70, 71, 230} // lengths 70, 1, 159
	T := int(seqs[len(seqs)-1])
	W := (NH + 2*KVH) * HS
	qkv, dout := randF32(rng, T*W, 2), randF32(rng, T*NH*HS, 1)
	type res struct{ out, lse, dqkv []float32 }
	v, s := runBoth(func() res {
		out, lse, dqkv := make(cpuBuf[float32], T*NH*HS), make(cpuBuf[float32], NH*T), make(cpuBuf[float32], T*W)
		d.Attention(out, lse, cpuBuf[float32](qkv), seqs, NH, KVH, HS)
		d.AttentionBackward(dqkv, cpuBuf[float32](dout), out, lse, cpuBuf[float32](qkv), seqs, NH, KVH, HS)
		return res{out, lse, dqkv}
	})
	sameBits(t, "out", v.out, s.out)
	sameBits(t, "lse", v.lse, s.lse)
	sameBits(t, "dqkv", v.dqkv, s.dqkv)
}

// AttentionCached against a float32 cache: the vector kernels give the
// element-by-element loops' bits (cachedCase, cachedShapes).
// Every kernel set this CPU runs is checked (an AVX-512 machine checks
// the avx2 tier's too).
func TestAttentionCachedBitForBitScalar(t *testing.T) {
	if len(attnKernelSets()) == 0 {
		t.Skip("no vector attention kernels on this CPU")
	}
	d := &Device[float32]{threads: 2}
	was := attn32
	defer func() { attn32 = was }()
	for _, kern := range attnKernelSets() {
		attn32 = kern
		for i, c := range cachedShapes {
			vec, _, _ := cachedCase(d, rand.New(rand.NewPCG(11, uint64(i))), c.HS, c.NH, c.KVH, d.Alloc, false)
			attnNoVector = true
			ref, _, _ := cachedCase(d, rand.New(rand.NewPCG(11, uint64(i))), c.HS, c.NH, c.KVH, d.Alloc, false)
			attnNoVector = false
			sameBits(t, fmt.Sprintf("%s: HS %d, %d heads, %d KV heads: out", kern.name, c.HS, c.NH, c.KVH), vec, ref)
		}
	}
}

// TestSoftmaxGroupKernelsSameBits runs attendGroup32's softmax through
// the three vector kernels and through softmaxGroupLoops on scores with
// ties, zeros of both signs (the largest of a head among them), infinities
// and wide ranges: p, m and the sums must agree bit for bit. A NaN score
// must be reported.
func TestSoftmaxGroupKernelsSameBits(t *testing.T) {
	for _, kern := range attnKernelSets() {
		t.Run(kern.name, func(t *testing.T) { softmaxGroupSameBits(t, kern) })
	}
}

func softmaxGroupSameBits(t *testing.T, kern *attnKernels) {
	const G = attnGroup
	rng := rand.New(rand.NewPCG(13, 14))
	negZero := float32(math.Copysign(0, -1))
	for trial := range 300 {
		n := 1 + rng.IntN(40)
		sc := make([]float32, G*n)
		for i := range sc {
			switch rng.IntN(8) {
			case 0:
				sc[i] = 0
			case 1:
				sc[i] = negZero
			case 2:
				sc[i] = sc[max(i-G, 0)] // a tie within the head
			case 3:
				if trial%5 == 0 {
					sc[i] = float32(math.Inf(-1 + 2*rng.IntN(2)))
					break
				}
				fallthrough
			default:
				sc[i] = float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64()))
			}
			if trial%3 == 0 && sc[i] > 0 {
				sc[i] = -sc[i] // heads whose largest score is a zero
			}
		}
		scale := 0.125 + rng.Float64()
		p, arg, ex := make([]float64, G*n), make([]float32, G*n), make([]float32, G*n)
		wp, warg, wex := make([]float64, G*n), make([]float32, G*n), make([]float32, G*n)
		var m, sum, wm, wsum [G]float64
		for h := range G {
			m[h], wm[h] = math.Inf(-1), math.Inf(-1)
		}
		if kern.scores(&sc[0], &p[0], n, scale, &m) {
			t.Fatalf("trial %d: a NaN reported among scores without one", trial)
		}
		kern.args(&p[0], &arg[0], n, &m)
		exp32Into(ex, arg)
		kern.weights(&ex[0], &p[0], n, &sum)
		softmaxGroupLoops(sc, wp, warg, wex, n, scale, &wm, &wsum)
		for h := range G {
			if math.Float64bits(m[h]) != math.Float64bits(wm[h]) || math.Float64bits(sum[h]) != math.Float64bits(wsum[h]) {
				t.Fatalf("trial %d, head %d: max %v sum %v, the loops' %v and %v", trial, h, m[h], sum[h], wm[h], wsum[h])
			}
		}
		for i := range p {
			if math.Float64bits(p[i]) != math.Float64bits(wp[i]) || math.Float32bits(arg[i]) != math.Float32bits(warg[i]) {
				t.Fatalf("trial %d, element %d: p %v arg %v, the loops' %v and %v", trial, i, p[i], arg[i], wp[i], warg[i])
			}
		}
	}
	for _, at := range []int{13, 2} { // heads 5 and 2: either half of a 256-bit kernel
		sc := make([]float32, G*3)
		sc[at] = float32(math.NaN())
		p, m := make([]float64, G*3), [G]float64{}
		if !kern.scores(&sc[0], &p[0], 3, 1, &m) {
			t.Fatalf("a NaN score at %d was not reported", at)
		}
	}
}
