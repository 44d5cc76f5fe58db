package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// Every op of the GPU device against the CPU device, the reference, on
// random inputs drawn fresh each run (the seed is logged; R1GO_TEST_SEED
// replays one). Storage and accumulation are float32 on both devices, so
// the tolerances below come from float32 rounding and summation order,
// not from bf16; each is stated where it is used, as max|gpu − cpu| over
// max|cpu| of the whole output (relErr). A NaN never passes.

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuErr  error
)

// gpuOrSkip opens the GPU once for all tests, or skips the test with the
// reason when the machine has none. Under R1GO_EMU_STRICT=1 (set by
// testdata/emu/ci.sh) a missing GPU fails the test instead: there the
// emulator must be found, and a skip would hide that it was not.
func gpuOrSkip(t *testing.T) *Device {
	t.Helper()
	gpuOnce.Do(func() { gpuDev, gpuErr = Open() })
	if (errors.Is(gpuErr, ErrNoDriver) || errors.Is(gpuErr, ErrNoDevice)) && os.Getenv("R1GO_EMU_STRICT") == "1" {
		t.Fatalf("R1GO_EMU_STRICT=1 but no GPU (emulated or real) opened: %v", gpuErr)
	}
	if errors.Is(gpuErr, ErrNoDriver) || errors.Is(gpuErr, ErrNoDevice) {
		t.Skipf("no GPU, skipping a GPU op test: %v", gpuErr)
	}
	if gpuErr != nil {
		t.Fatal(gpuErr)
	}
	return gpuDev
}

type opEnv struct {
	t   *testing.T
	cpu model.Device
	gpu *Device
	rng *rand.Rand
}

func newOpEnv(t *testing.T) *opEnv {
	t.Helper()
	g := gpuOrSkip(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("R1GO_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (R1GO_TEST_SEED=%d replays it)", seed, seed)
	return &opEnv{t: t, cpu: cpu.New(), gpu: g, rng: rand.New(rand.NewPCG(seed, 77))}
}

// randn returns n normal values times scale.
func (e *opEnv) randn(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * e.rng.NormFloat64())
	}
	return v
}

// pair uploads the same values to both devices.
func (e *opEnv) pair(x []float32) (c, g model.Buffer) { return upload(e.cpu, x), upload(e.gpu, x) }

// check compares a GPU buffer with the CPU's within tol (relErr).
func (e *opEnv) check(what string, c, g model.Buffer, tol float64) {
	e.t.Helper()
	if err := e.gpu.Sync(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	want, got := download(e.cpu, c), download(e.gpu, g)
	if err := relErr(got, want); !(err <= tol) {
		e.t.Errorf("%s: relative error %.3g > %.3g", what, err, tol)
	} else {
		e.t.Logf("%s: relative error %.3g (bound %.3g)", what, err, tol)
	}
}

// gemmTol is the bound for a K-long float32 dot product: each device's
// sum carries at most about K·2^−24 relative error in the worst order,
// √K·2^−24 typically; 4·√K·2^−24 plus a floor. TF32 inputs keep 10
// mantissa bits, so there the rounding of the inputs dominates: 2^−10.
func (e *opEnv) gemmTol(K int) float64 {
	if e.gpu.computeType == cublasCompute32FFastTF32 {
		return 2e-3
	}
	return 4*math.Sqrt(float64(K))*math.Ldexp(1, -24) + 1e-6
}

func TestGPUGemm(t *testing.T) {
	e := newOpEnv(t)
	for trial := 0; trial < 8; trial++ {
		transA, transB := trial&1 == 1, trial&2 == 2
		m, n, k := 37+e.rng.IntN(60), 29+e.rng.IntN(70), 300+e.rng.IntN(300)
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+e.rng.IntN(5), bc+e.rng.IntN(5), n+e.rng.IntN(5)
		ca, ga := e.pair(e.randn(ar*lda, 1))
		cb, gb := e.pair(e.randn(br*ldb, 1))
		cc, gc := e.pair(e.randn(m*ldc, 1))
		beta := float32(trial / 4) // 0, then 1
		e.cpu.Gemm(transA, transB, m, n, k, 0.7, ca, lda, cb, ldb, beta, cc, ldc)
		e.gpu.Gemm(transA, transB, m, n, k, 0.7, ga, lda, gb, ldb, beta, gc, ldc)
		e.check("Gemm", cc, gc, e.gemmTol(k))
	}
}

// TestGPUGemmBF16: bf16 inputs (rounded on the GPU by Convert), float32
// accumulation, float32 or bf16 output. Against the CPU on the same
// rounded inputs the only differences are summation order (float32
// output) plus one bf16 rounding of each output (bf16 output: 2^−8 of the
// value). Against the CPU on the unrounded inputs, each product carries
// the rounding of both factors, at most 2·2^−8 relative, and the errors of
// K random-sign products add like a random walk; 2^−6 of max|c| bounds it
// with a wide margin.
func TestGPUGemmBF16(t *testing.T) {
	e := newOpEnv(t)
	m, n, k := 70, 45, 512
	a, b := e.randn(m*k, 1), e.randn(n*k, 1)
	ar, br := make([]float32, len(a)), make([]float32, len(b))
	for i := range a {
		ar[i] = bf16.Round(a[i])
	}
	for i := range b {
		br[i] = bf16.Round(b[i])
	}
	toBF16 := func(x []float32) Buffer {
		h := e.gpu.AllocType(len(x), BF16)
		e.gpu.Convert(h, upload(e.gpu, x).(Buffer))
		return h
	}
	ga, gb := toBF16(a), toBF16(b)
	cpuGemm := func(x, y []float32) model.Buffer {
		c := e.cpu.Alloc(m * n)
		e.cpu.Gemm(false, true, m, n, k, 1, upload(e.cpu, x), k, upload(e.cpu, y), k, 0, c, n)
		return c
	}
	rounded, exact := cpuGemm(ar, br), cpuGemm(a, b)
	gc := e.gpu.Alloc(m * n)
	e.gpu.Gemm(false, true, m, n, k, 1, ga, k, gb, k, 0, gc, n)
	e.check("bf16 Gemm, float32 out, vs CPU on rounded inputs", rounded, gc, e.gemmTol(k))
	e.check("bf16 Gemm, float32 out, vs CPU on float32 inputs", exact, gc, math.Ldexp(1, -6))
	gh := e.gpu.AllocType(m*n, BF16)
	e.gpu.Gemm(false, true, m, n, k, 1, ga, k, gb, k, 0, gh, n)
	back := e.gpu.Alloc(m * n)
	e.gpu.Convert(back.(Buffer), gh)
	e.check("bf16 Gemm, bf16 out, vs CPU on rounded inputs", rounded, back, e.gemmTol(k)+math.Ldexp(1, -8))
}

func TestGPUElementwise(t *testing.T) {
	e := newOpEnv(t)
	n := 100003
	ca, ga := e.pair(e.randn(n, 1))
	cb, gb := e.pair(e.randn(n, 1))
	// One float32 addition on each device: identical results.
	e.cpu.Add(ca, ca, cb)
	e.gpu.Add(ga, ga, gb)
	e.check("Add (out aliases a)", ca, ga, 0)

	rows, cols, ldo := 301, 45, 50
	co, gout := e.pair(e.randn(rows*ldo, 1))
	cbias, gbias := e.pair(e.randn(cols, 1))
	e.cpu.AddBias(co, ldo, cbias, rows, cols)
	e.gpu.AddBias(gout, ldo, gbias, rows, cols)
	e.check("AddBias", co, gout, 0)
	// Column sums of 301 rows: float32 summation order differs.
	cdb, gdb := e.pair(e.randn(cols, 1))
	e.cpu.BiasBackward(cdb, co, ldo, rows, cols)
	e.gpu.BiasBackward(gdb, gout, ldo, rows, cols)
	e.check("BiasBackward (accumulates)", cdb, gdb, 4*math.Sqrt(float64(rows))*math.Ldexp(1, -24)*4)

	// expf against float64 exp: a few float32 ulps.
	I := 1000
	cgu, ggu := e.pair(e.randn(rows*2*I, 2))
	cout, gout2 := e.pair(make([]float32, rows*I))
	e.cpu.SwiGLU(cout, cgu, rows, I)
	e.gpu.SwiGLU(gout2, ggu, rows, I)
	e.check("SwiGLU", cout, gout2, 1e-6)
	cdy, gdy := e.pair(e.randn(rows*I, 1))
	cdgu, gdgu := e.pair(make([]float32, rows*2*I))
	e.cpu.SwiGLUBackward(cdgu, cdy, cgu, rows, I)
	e.gpu.SwiGLUBackward(gdgu, gdy, ggu, rows, I)
	e.check("SwiGLUBackward", cdgu, gdgu, 1e-6)
}

func TestGPUMemory(t *testing.T) {
	e := newOpEnv(t)
	x := e.randn(1000, 1)
	g := e.gpu.Alloc(1000)
	for i, v := range download(e.gpu, g) {
		if v != 0 {
			t.Fatalf("Alloc is not zero-filled: element %d is %v", i, v)
		}
	}
	e.gpu.Upload(g.Slice(100, 500), x[:500])
	h := e.gpu.Alloc(500)
	e.gpu.Copy(h, g.Slice(100, 500))
	if got := download(e.gpu, h); relErr(got, x[:500]) != 0 {
		t.Fatal("Upload into a slice then Copy out of it does not round-trip")
	}
	e.gpu.Zero(g.Slice(100, 250))
	got := download(e.gpu, g)
	for i, v := range got {
		want := float32(0)
		if i >= 350 && i < 600 {
			want = x[i-100]
		}
		if v != want {
			t.Fatalf("after Zero of [100, 350): element %d is %v, want %v", i, v, want)
		}
	}
	e.gpu.Free(g)
	e.gpu.Free(h)
	if err := e.gpu.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestGPUEmbedding(t *testing.T) {
	e := newOpEnv(t)
	V, C, T := 500, 96, 300
	ids := make([]int32, T)
	for i := range ids {
		ids[i] = int32(e.rng.IntN(V / 10)) // repeats, so the backward accumulates
	}
	ct, gt := e.pair(e.randn(V*C, 1))
	co, gout := e.pair(make([]float32, T*C))
	e.cpu.Embedding(co, ids, ct, C)
	e.gpu.Embedding(gout, ids, gt, C)
	e.check("Embedding", co, gout, 0)
	cdy, gdy := e.pair(e.randn(T*C, 1))
	e.cpu.EmbeddingBackward(ct, cdy, ids, C)
	e.gpu.EmbeddingBackward(gt, gdy, ids, C)
	// Up to ~T/(V/10) float32 additions per row, in another order.
	e.check("EmbeddingBackward (accumulates)", ct, gt, 1e-6)
}

func TestGPURMSNorm(t *testing.T) {
	e := newOpEnv(t)
	for _, C := range []int{896, 37, 3584} {
		rows := 203
		cx, gx := e.pair(e.randn(rows*C, 3))
		cw, gw := e.pair(e.randn(C, 1))
		co, gout := e.pair(make([]float32, rows*C))
		cr, gr := e.pair(make([]float32, rows))
		e.cpu.RMSNorm(co, nil, cr, cx, nil, cw, rows, C, 1e-6)
		e.gpu.RMSNorm(gout, nil, gr, gx, nil, gw, rows, C, 1e-6)
		// Σx² over C in float32 vs float64: ≈ √C·2^−24 relative, halved by the sqrt.
		tol := 4*math.Sqrt(float64(C))*math.Ldexp(1, -24) + 1e-6
		e.check("RMSNorm rstd", cr, gr, tol)
		e.check("RMSNorm out", co, gout, tol)
		cdy, gdy := e.pair(e.randn(rows*C, 1))
		cdx, gdx := e.pair(make([]float32, rows*C))
		cdw, gdw := e.pair(e.randn(C, 1))
		e.cpu.RMSNormBackward(cdx, nil, cdw, cdy, cx, cw, cr, nil, rows, C)
		e.gpu.RMSNormBackward(gdx, nil, gdw, gdy, gx, gw, gr, nil, rows, C)
		e.check("RMSNormBackward dinp", cdx, gdx, 10*tol)
		// dw sums 203 rows per column (CPU in float64).
		e.check("RMSNormBackward dw (accumulates)", cdw, gdw, 10*tol+4*math.Sqrt(float64(rows))*math.Ldexp(1, -24))
	}
}

func TestGPURoPE(t *testing.T) {
	e := newOpEnv(t)
	T, nh, HS := 97, 3, 64
	ld, off := nh*HS+70, 5
	pos := make([]int32, T)
	for i := range pos {
		pos[i] = int32(e.rng.IntN(32768)) // long-context angles
	}
	cx, gx := e.pair(e.randn(T*ld, 1))
	e.cpu.RoPE(cx, ld, off, pos, nh, HS, 1e6)
	e.gpu.RoPE(gx, ld, off, pos, nh, HS, 1e6)
	// Same float32 angle and double rotation on both: only cos/sin of the
	// two math libraries differ, far below one float32 ulp.
	e.check("RoPE", cx, gx, 2e-7)
	back := make([]int32, T)
	for i, p := range pos {
		back[i] = -p
	}
	e.cpu.RoPE(cx, ld, off, back, nh, HS, 1e6)
	e.gpu.RoPE(gx, ld, off, back, nh, HS, 1e6)
	e.check("RoPE at negated positions (the backward)", cx, gx, 2e-7)
}

func TestGPUAttention(t *testing.T) {
	e := newOpEnv(t)
	cases := []struct {
		seqs        []int32
		NH, KVH, HS int
		name        string
	}{
		{[]int32{0, 5, 6, 40, 107}, 4, 2, 64, "GQA 2:1, HS 64, a 1-token sequence"},
		{[]int32{0, 130, 131}, 14, 2, 64, "Qwen2.5-0.5B heads, 130 tokens"},
		{[]int32{0, 33, 70}, 4, 4, 128, "MHA, HS 128"},
		{[]int32{0, 9, 50}, 6, 3, 40, "HS 40 (not a multiple of 32)"},
		{[]int32{0, 20}, 2, 1, 256, "HS 256 (the largest)"},
	}
	for _, c := range cases {
		T := int(c.seqs[len(c.seqs)-1])
		W := (c.NH + 2*c.KVH) * c.HS
		cq, gq := e.pair(e.randn(T*W, 1))
		co, gout := e.pair(make([]float32, T*c.NH*c.HS))
		cl, gl := e.pair(make([]float32, c.NH*T))
		e.cpu.Attention(co, cl, cq, c.seqs, c.NH, c.KVH, c.HS)
		e.gpu.Attention(gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
		// Scores are HS-long dot products, outputs probability-weighted
		// sums of up to T values: float32 rounding of both, a few 1e-6.
		tol := 4*math.Sqrt(float64(c.HS+T))*math.Ldexp(1, -24) + 2e-6
		e.check(c.name+": Attention out", co, gout, tol)
		e.check(c.name+": Attention lse", cl, gl, tol)
		cdy, gdy := e.pair(e.randn(T*c.NH*c.HS, 1))
		cdq, gdq := e.pair(e.randn(T*W, 1)) // garbage: the backward must overwrite all of it
		e.cpu.AttentionBackward(cdq, cdy, co, cl, cq, c.seqs, c.NH, c.KVH, c.HS)
		e.gpu.AttentionBackward(gdq, gdy, gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
		e.check(c.name+": AttentionBackward dqkv", cdq, gdq, 20*tol)
	}
}

// TestGPUAttentionCached runs a prefill of two slots, then decode steps
// that mix a one-token decode with a multi-token chunk, on both devices,
// comparing every output and the caches.
func TestGPUAttentionCached(t *testing.T) {
	e := newOpEnv(t)
	NH, KVH, HS := 14, 2, 64
	slots, maxLen := 4, 64
	W, kvw := (NH+2*KVH)*HS, KVH*HS
	ckc, gkc := e.pair(make([]float32, slots*maxLen*kvw))
	cvc, gvc := e.pair(make([]float32, slots*maxLen*kvw))
	steps := []struct{ slots, pos0, lens []int32 }{
		{[]int32{2, 0}, []int32{0, 0}, []int32{19, 11}},
		{[]int32{0, 2}, []int32{11, 19}, []int32{1, 1}},
		{[]int32{2, 0, 3}, []int32{20, 12, 0}, []int32{1, 9, 1}},
	}
	for s, st := range steps {
		T := 0
		for _, n := range st.lens {
			T += int(n)
		}
		cq, gq := e.pair(e.randn(T*W, 1))
		co, gout := e.pair(make([]float32, T*NH*HS))
		e.cpu.AttentionCached(co, cq, nil, ckc, cvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		e.gpu.AttentionCached(gout, gq, nil, gkc, gvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		tol := 4*math.Sqrt(float64(HS+maxLen))*math.Ldexp(1, -24) + 2e-6
		e.check("AttentionCached out, step "+strconv.Itoa(s), co, gout, tol)
		e.check("AttentionCached key cache, step "+strconv.Itoa(s), ckc, gkc, 0)
		e.check("AttentionCached value cache, step "+strconv.Itoa(s), cvc, gvc, 0)
	}
}

func TestGPULMHead(t *testing.T) {
	e := newOpEnv(t)
	defer func(b, r int) { headLogitBudget, headMaxRows = b, r }(headLogitBudget, headMaxRows)
	for _, shape := range []struct{ T, C, V, budget, rows int }{
		{70, 64, 1000, 32 << 20, 2048}, // one block, one chunk
		{70, 64, 1000, 16 * 256, 16},   // 5 row blocks × 4 chunks (the last ones partial)
		{33, 96, 5003, 32 * 1024, 32},
	} {
		headLogitBudget, headMaxRows = shape.budget, shape.rows
		T, C, V := shape.T, shape.C, shape.V
		targets := make([]int32, T)
		for i := range targets {
			targets[i] = int32(e.rng.IntN(V))
			if i%7 == 3 {
				targets[i] = -1
			}
		}
		ch, gh := e.pair(e.randn(T*C, 1))
		cw, gw := e.pair(e.randn(V*C, 0.3))
		clp, glp := e.pair(make([]float32, T))
		cent, gent := e.pair(make([]float32, T))
		clse, glse := e.pair(make([]float32, T))
		e.cpu.LMHead(clp, cent, clse, nil, ch, cw, targets, T, C, V)
		e.gpu.LMHead(glp, gent, glse, nil, gh, gw, targets, T, C, V)
		// Logits are C-long float32 dot products (errors ≈ √C·2^−24·|z|);
		// the sums over V run in float64 on both devices.
		tol := e.gemmTol(C) * 4
		e.check("LMHead logprob", clp, glp, tol)
		e.check("LMHead entropy", cent, gent, tol)
		e.check("LMHead lse", clse, glse, tol)
		cdlp, gdlp := e.pair(e.randn(T, 1))
		cdent, gdent := e.pair(e.randn(T, 1))
		cdh, gdh := e.pair(e.randn(T*C, 1)) // overwritten
		cdw, gdw := e.pair(e.randn(V*C, 1)) // accumulated into
		e.cpu.LMHeadBackward(cdh, cdw, cdlp, cdent, nil, ch, cw, clse, cent, targets, T, C, V)
		e.gpu.LMHeadBackward(gdh, gdw, gdlp, gdent, nil, gh, gw, glse, gent, targets, T, C, V)
		e.check("LMHeadBackward dh", cdh, gdh, 10*tol)
		e.check("LMHeadBackward dw (accumulates)", cdw, gdw, 10*tol)
		// A decode step's logits of chosen rows: the rows gathered, then one product.
		rows := []int32{0, int32(T - 1), 5, 5}
		cz, gz := e.pair(make([]float32, len(rows)*V))
		cg, gg := e.pair(make([]float32, len(rows)*C))
		e.cpu.Embedding(cg, rows, ch, C)
		e.gpu.Embedding(gg, rows, gh, C)
		e.cpu.Gemm(false, true, len(rows), V, C, 1, cg, C, cw, C, 0, cz, V)
		e.gpu.Gemm(false, true, len(rows), V, C, 1, gg, C, gw, C, 0, gz, V)
		e.check("logits of chosen rows", cz, gz, e.gemmTol(C))
	}
}

func TestGPUAdamW(t *testing.T) {
	e := newOpEnv(t)
	n := 1<<20 + 13
	cp, gp := e.pair(e.randn(n, 1))
	cg, gg := e.pair(e.randn(n, 1e-2))
	cm, gm := e.pair(e.randn(n, 1e-3))
	v := e.randn(n, 1e-3)
	for i := range v {
		v[i] *= v[i]
	}
	cv, gv := e.pair(v)
	for step := 1; step <= 3; step++ {
		hp := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step, GradScale: 0.5}
		e.cpu.AdamW(cp, cg, cm, cv, hp)
		e.gpu.AdamW(gp, gg, gm, gv, hp)
	}
	// A handful of float32 operations per element against the CPU's
	// float64 arithmetic: a few ulps of the updated values.
	e.check("AdamW p", cp, gp, 1e-6)
	e.check("AdamW m", cm, gm, 1e-6)
	e.check("AdamW v", cv, gv, 1e-6)
	c, g := e.cpu.SumSquares(cp), e.gpu.SumSquares(gp)
	// Both accumulate in float64; only the order differs.
	if math.Abs(g-c) > 1e-9*c || math.IsNaN(g) {
		t.Errorf("SumSquares %v, CPU %v", g, c)
	}
}

func TestGPUConvertBF16(t *testing.T) {
	e := newOpEnv(t)
	x := e.randn(4099, 10)
	x[0], x[1] = float32(math.NaN()), float32(math.Inf(-1))
	src := upload(e.gpu, x)
	h := e.gpu.AllocType(len(x), BF16)
	back := e.gpu.AllocType(len(x), F32)
	e.gpu.Convert(h, src.(Buffer))
	e.gpu.Convert(back, h)
	got := download(e.gpu, back)
	for i, v := range x {
		want := bf16.Round(v)
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(v)) && math.IsNaN(float64(got[i]))) {
			t.Fatalf("element %d: GPU bf16 round trip of %v gives %v, host gives %v", i, v, got[i], want)
		}
	}
}
