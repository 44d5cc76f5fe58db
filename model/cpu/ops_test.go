package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Finite-difference checks of every op's backward on the float64 CPU
// device. Each op's output is reduced to a scalar L = Σ r⊙y with random r,
// so dL/dy = r is the upstream gradient; the analytic gradient of every
// input is compared with central differences (h = 1e-6).

func randVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	return v
}

func dotF(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// fdCheck perturbs each element of x (in place), re-evaluates loss, and
// compares the central difference with analytic[i].
func fdCheck(t *testing.T, name string, x []float64, loss func() float64, analytic []float64) {
	t.Helper()
	const h = 1e-6
	var worst, scale float64
	for _, g := range analytic {
		scale = math.Max(scale, math.Abs(g))
	}
	for i := range x {
		old := x[i]
		x[i] = old + h
		lp := loss()
		x[i] = old - h
		lm := loss()
		x[i] = old
		num := (lp - lm) / (2 * h)
		if math.IsNaN(analytic[i]) || math.IsNaN(num) {
			t.Fatalf("%s[%d]: NaN (analytic %v, numeric %v)", name, i, analytic[i], num)
		}
		worst = math.Max(worst, math.Abs(num-analytic[i]))
	}
	if rel := worst / math.Max(scale, 1e-12); rel > 1e-6 {
		t.Errorf("%s: max |numeric − analytic| = %.3g, %.3g of the largest gradient (bound 1e-6)", name, worst, rel)
	}
}

func TestRMSNormGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(1, 2))
	T, C := 5, 7
	x, w, r := randVec(rng, T*C, 1), randVec(rng, C, 1), randVec(rng, T*C, 1)
	out, rstd := make([]float64, T*C), make([]float64, T)
	loss := func() float64 {
		d.RMSNorm(cpuBuf[float64](out), nil, cpuBuf[float64](rstd), cpuBuf[float64](x), nil, cpuBuf[float64](w), T, C, 1e-6)
		return dotF(out, r)
	}
	loss()
	dx, dw := make([]float64, T*C), make([]float64, C)
	d.RMSNormBackward(cpuBuf[float64](dx), nil, cpuBuf[float64](dw), cpuBuf[float64](r), cpuBuf[float64](x), cpuBuf[float64](w), cpuBuf[float64](rstd), nil, T, C)
	fdCheck(t, "dx", x, loss, dx)
	fdCheck(t, "dw", w, loss, dw)
}

func TestSwiGLUGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(3, 4))
	T, I := 4, 6
	gu, r := randVec(rng, T*2*I, 2), randVec(rng, T*I, 1)
	out := make([]float64, T*I)
	loss := func() float64 {
		d.SwiGLU(cpuBuf[float64](out), cpuBuf[float64](gu), T, I)
		return dotF(out, r)
	}
	dgu := make([]float64, T*2*I)
	d.SwiGLUBackward(cpuBuf[float64](dgu), cpuBuf[float64](r), cpuBuf[float64](gu), T, I)
	fdCheck(t, "dgu", gu, loss, dgu)
}

func TestRoPEGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(5, 6))
	T, nh, HS, ld, off := 6, 2, 8, 2*8+5, 3
	x, r := randVec(rng, T*ld, 1), randVec(rng, T*ld, 1)
	pos := []int32{0, 1, 2, 0, 7, 100}
	y := make([]float64, len(x))
	loss := func() float64 {
		copy(y, x)
		d.RoPE(cpuBuf[float64](y), ld, off, pos, nh, HS, 1e4)
		return dotF(y, r)
	}
	dx := append([]float64(nil), r...)
	back := make([]int32, len(pos))
	for i, p := range pos {
		back[i] = -p
	}
	d.RoPE(cpuBuf[float64](dx), ld, off, back, nh, HS, 1e4) // the backward: the negated positions
	fdCheck(t, "dx", x, loss, dx)
	// Columns outside [off, off+nh·HS) pass through untouched.
	loss()
	for t0 := 0; t0 < T; t0++ {
		for c := 0; c < ld; c++ {
			if (c < off || c >= off+nh*HS) && y[t0*ld+c] != x[t0*ld+c] {
				t.Fatalf("RoPE changed column %d of row %d outside its heads", c, t0)
			}
		}
	}
}

func TestAttentionGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(7, 8))
	NH, KVH, HS := 4, 2, 3
	seqs := []int32{0, 3, 4, 8} // lengths 3, 1, 4
	T := 8
	W := (NH + 2*KVH) * HS
	qkv, r := randVec(rng, T*W, 1), randVec(rng, T*NH*HS, 1)
	out, lse := make([]float64, T*NH*HS), make([]float64, NH*T)
	loss := func() float64 {
		d.Attention(cpuBuf[float64](out), cpuBuf[float64](lse), cpuBuf[float64](qkv), seqs, NH, KVH, HS)
		return dotF(out, r)
	}
	loss()
	dqkv := make([]float64, T*W)
	d.AttentionBackward(cpuBuf[float64](dqkv), cpuBuf[float64](r), cpuBuf[float64](out), cpuBuf[float64](lse), cpuBuf[float64](qkv), seqs, NH, KVH, HS)
	fdCheck(t, "dqkv", qkv, loss, dqkv)
}

func TestLMHeadGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(9, 10))
	T, C, V := 5, 4, 11
	h, w := randVec(rng, T*C, 1), randVec(rng, V*C, 1)
	targets := []int32{3, -1, 0, 10, 7}
	rlp, rent := randVec(rng, T, 1), randVec(rng, T, 1)
	lp, ent, lse := make([]float64, T), make([]float64, T), make([]float64, T)
	loss := func() float64 {
		d.LMHead(cpuBuf[float64](lp), cpuBuf[float64](ent), cpuBuf[float64](lse), nil, cpuBuf[float64](h), cpuBuf[float64](w), targets, T, C, V)
		return dotF(lp, rlp) + dotF(ent, rent)
	}
	loss()
	// Against a direct softmax.
	for t0 := 0; t0 < T; t0++ {
		z := make([]float64, V)
		m := math.Inf(-1)
		for v := range z {
			z[v] = dotF(h[t0*C:(t0+1)*C], w[v*C:(v+1)*C])
			m = math.Max(m, z[v])
		}
		var s float64
		for _, zv := range z {
			s += math.Exp(zv - m)
		}
		l := m + math.Log(s)
		var H float64
		for _, zv := range z {
			p := math.Exp(zv - l)
			H -= p * (zv - l)
		}
		want := 0.0
		if targets[t0] >= 0 {
			want = z[targets[t0]] - l
		}
		if math.Abs(lp[t0]-want) > 1e-12 || math.Abs(ent[t0]-H) > 1e-12 {
			t.Fatalf("token %d: logprob %v entropy %v, direct softmax gives %v and %v", t0, lp[t0], ent[t0], want, H)
		}
	}
	dh, dw := make([]float64, T*C), make([]float64, V*C)
	d.LMHeadBackward(cpuBuf[float64](dh), cpuBuf[float64](dw), cpuBuf[float64](rlp), cpuBuf[float64](rent), nil, cpuBuf[float64](h), cpuBuf[float64](w), cpuBuf[float64](lse), cpuBuf[float64](ent), targets, T, C, V)
	fdCheck(t, "dh", h, loss, dh)
	fdCheck(t, "dw", w, loss, dw)
}

func TestEmbeddingAndBiasGrad(t *testing.T) {
	d := NewFloat64()
	rng := rand.New(rand.NewPCG(11, 12))
	V, C, T := 6, 3, 5
	ids := []int32{1, 4, 1, 0, 5}
	w, r := randVec(rng, V*C, 1), randVec(rng, T*C, 1)
	out := make([]float64, T*C)
	loss := func() float64 {
		d.Embedding(cpuBuf[float64](out), ids, cpuBuf[float64](w), C)
		return dotF(out, r)
	}
	dw := make([]float64, V*C)
	d.EmbeddingBackward(cpuBuf[float64](dw), cpuBuf[float64](r), ids, C)
	fdCheck(t, "dtable", w, loss, dw)

	b := randVec(rng, C, 1)
	y := make([]float64, T*(C+2))
	lossB := func() float64 {
		clear(y)
		d.AddBias(cpuBuf[float64](y), C+2, cpuBuf[float64](b), T, C)
		var s float64
		for t0 := 0; t0 < T; t0++ {
			s += dotF(y[t0*(C+2):t0*(C+2)+C], r[t0*C:(t0+1)*C])
		}
		return s
	}
	g := make([]float64, T*(C+2))
	for t0 := 0; t0 < T; t0++ {
		copy(g[t0*(C+2):], r[t0*C:(t0+1)*C])
	}
	db := make([]float64, C)
	d.BiasBackward(cpuBuf[float64](db), cpuBuf[float64](g), C+2, T, C)
	fdCheck(t, "dbias", b, lossB, db)
}
