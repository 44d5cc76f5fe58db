package cuda

import (
	"math"
	"strconv"
	"testing"

	"github.com/r1go/r1go/model"
)

// A layer's activations in bf16 under mixed precision (activations.go of
// package model: ln1, qkv, att, ln2, gu, act in compute storage): every op
// variant that reads or writes them, against the CPU device in float32 fed
// the same inputs rounded to bf16, as TestGPUBF16Storage does for the
// residual stream. A bf16 input widens to float32 exactly, so each op is
// the float32 op on those inputs. An op that writes bf16 without a
// reduction (AddBias) gives exactly the CPU's float32 result rounded to
// bf16; one with reductions or library functions (RMSNorm, RoPE, SwiGLU,
// attention, Gemm) differs from the CPU's float32 result by its float32
// tolerance (that of device_test.go) plus one rounding to bf16, |Δ| ≤
// 2^−8·|x| (checkBF16Out). Gradients stay float32 and keep the float32
// tolerances.

// checkBF16Out requires each value of the bf16 GPU buffer g to be within
// one bf16 rounding (2^−8·|want|) plus tol·max|want| of the CPU's float32
// values of c.
func (e *opEnv) checkBF16Out(what string, c model.Buffer, g Buffer, tol float64) {
	e.t.Helper()
	if err := e.gpu.Sync(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	want, got := download(e.cpu, c), downloadBF16(e.gpu, g)
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	worst := 0.0
	for i := range want {
		bound := math.Ldexp(math.Abs(float64(want[i])), -8) + tol*scale + 1e-30
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= bound) {
			e.t.Fatalf("%s[%d] = %g, CPU float32 %g: |Δ| %.3g past one bf16 rounding plus %.3g relative", what, i, got[i], want[i], d, tol)
		}
		worst = math.Max(worst, d/bound)
	}
	e.t.Logf("%s: bf16 output within %.2f of its bound (one rounding + %.3g), relative error %.3g", what, worst, tol, relErr(got, want))
}

// bf16Zeros is a bf16 GPU buffer and a float32 CPU buffer of n zeros.
func (e *opEnv) bf16Zeros(n int) (model.Buffer, Buffer) {
	return upload(e.cpu, make([]float32, n)), e.gpu.AllocType(n, BF16)
}

func TestGPUBF16LayerOps(t *testing.T) {
	e := newOpEnv(t)

	// RMSNorm from the bf16 residual stream into a bf16 norm output (ln1,
	// ln2), with a float32 weight (a trained model's master) and a bf16
	// one (a frozen bf16 model).
	for _, C := range []int{896, 37} {
		rows := 203
		tol := 4*math.Sqrt(float64(C))*math.Ldexp(1, -24) + 1e-6
		cx, gx, _ := e.bf16Pair(e.randn(rows*C, 3))
		w := e.randn(C, 1)
		cw, gw := e.pair(w)
		cwr, gwr, _ := e.bf16Pair(w)
		for _, v := range []struct {
			name   string
			cw, gw model.Buffer
		}{{"f32 w", cw, gw}, {"bf16 w", cwr, gwr}} {
			co, gout := e.bf16Zeros(rows * C)
			cr, gr := e.pair(make([]float32, rows))
			e.cpu.RMSNorm(co, nil, cr, cx, nil, v.cw, rows, C, 1e-6)
			e.gpu.RMSNorm(gout, nil, gr, gx, nil, v.gw, rows, C, 1e-6)
			e.check("RMSNorm bf16 → bf16, "+v.name+", C "+strconv.Itoa(C)+": rstd", cr, gr, tol)
			e.checkBF16Out("RMSNorm bf16 → bf16, "+v.name+", C "+strconv.Itoa(C)+": out", co, gout, tol)
		}
	}

	// AddBias into a bf16 projection (qkv), float32 and bf16 biases, on
	// the first cols of rows ld wide: one float32 add, rounded once.
	rows, cols, ld := 77, 130, 150
	bias := e.randn(cols, 1)
	cb, gb := e.pair(bias)
	cbr, gbr, _ := e.bf16Pair(bias)
	for _, v := range []struct {
		name   string
		cb, gb model.Buffer
	}{{"f32 bias", cb, gb}, {"bf16 bias", cbr, gbr}} {
		co, gout, _ := e.bf16Pair(e.randn(rows*ld, 1))
		e.cpu.AddBias(co, ld, v.cb, rows, cols)
		e.gpu.AddBias(gout, ld, v.gb, rows, cols)
		e.checkRounded("AddBias into bf16, "+v.name, co, gout)
	}

	// RoPE in place on bf16 q|k, forward at long-context angles. The
	// rotation runs in double on both devices (TestGPURoPE: 2e-7), and the
	// GPU rounds the result once more to bf16.
	T, nh, HS := 97, 3, 64
	ldr, off := nh*HS+70, 5
	pos := make([]int32, T)
	for i := range pos {
		pos[i] = int32(e.rng.IntN(32768))
	}
	crx, grx, _ := e.bf16Pair(e.randn(T*ldr, 1))
	e.cpu.RoPE(crx, ldr, off, pos, nh, HS, 1e6)
	e.gpu.RoPE(grx, ldr, off, pos, nh, HS, 1e6)
	e.checkBF16Out("RoPE on bf16", crx, grx, 2e-7)

	// SwiGLU from a bf16 gate|up into a bf16 output; its backward reads the
	// bf16 gu and writes a float32 dgu. expf of the two libraries differs
	// by an ulp or two: 1e-6.
	I := 300
	cgu, ggu, _ := e.bf16Pair(e.randn(rows*2*I, 2))
	ca, ga := e.bf16Zeros(rows * I)
	e.cpu.SwiGLU(ca, cgu, rows, I)
	e.gpu.SwiGLU(ga, ggu, rows, I)
	e.checkBF16Out("SwiGLU bf16 → bf16", ca, ga, 1e-6)
	cdy, gdy := e.pair(e.randn(rows*I, 1))
	cdgu, gdgu := e.pair(e.randn(rows*2*I, 1))
	e.cpu.SwiGLUBackward(cdgu, cdy, cgu, rows, I)
	e.gpu.SwiGLUBackward(gdgu, gdy, ggu, rows, I)
	e.check("SwiGLUBackward, bf16 gu", cdgu, gdgu, 2e-6)

	// Gemm of bf16 activations: against registered float32 weights (read
	// from their bf16 copy) into a bf16 projection, accumulating (beta 1,
	// as a LoRA adapter adds into qkv) into one, against unregistered
	// float32 weights (a LoRA A, rounded on its way in) into float32, and
	// a float32 gradient against a bf16 activation into a float32 weight
	// gradient. The CPU multiplies the same inputs rounded to bf16.
	me := newMixedEnv(t)
	m, n, k := 50, 130, 256
	w := e.randn(n*k+11, 0.3)
	cwr, _, _ := me.bf16Pair(w)
	_, gw := me.pair(w)
	me.gpu.UseBF16(gw)
	cx, gx, _ := me.bf16Pair(e.randn(m*k, 1))
	cc, gc := me.bf16Zeros(m * n)
	me.cpu.Gemm(false, true, m, n, k, 1, cx, k, cwr.Slice(11, n*k), k, 0, cc, n)
	me.gpu.Gemm(false, true, m, n, k, 1, gx, k, gw.Slice(11, n*k), k, 0, gc, n)
	me.checkBF16Out("Gemm bf16 x · registered wᵀ → bf16", cc, gc, me.gemmTol(k))
	me.cpu.Gemm(false, true, m, n, k, 0.5, cx, k, cwr.Slice(11, n*k), k, 1, cc, n)
	me.gpu.Gemm(false, true, m, n, k, 0.5, gx, k, gw.Slice(11, n*k), k, 1, gc, n)
	// The CPU adds to its float32 c, the GPU to its bf16 one: two roundings.
	me.checkBF16Out("Gemm bf16 x · registered wᵀ + bf16 c → bf16", cc, gc, me.gemmTol(k)+math.Ldexp(1, -8))
	lw := e.randn(n*k, 0.3)
	clr, _, _ := me.bf16Pair(lw)
	_, glw := me.pair(lw)
	cf, gf := me.pair(make([]float32, m*n))
	me.cpu.Gemm(false, true, m, n, k, 1, cx, k, clr, k, 0, cf, n)
	me.gpu.Gemm(false, true, m, n, k, 1, gx, k, glw, k, 0, gf, n)
	me.check("Gemm bf16 x · unregistered f32 wᵀ → f32", cf, gf, me.gemmTol(k))
	dy := e.randn(m*n, 1)
	cdyr, _, _ := me.bf16Pair(dy)
	_, gdyf := me.pair(dy)
	cdw, gdw := me.pair(e.randn(n*k, 1))
	me.cpu.Gemm(true, false, n, k, m, 1, cdyr, n, cx, k, 1, cdw, k)
	me.gpu.Gemm(true, false, n, k, m, 1, gdyf, n, gx, k, 1, gdw, k)
	me.check("Gemm f32 dyᵀ · bf16 x + f32 dw → f32 (weight gradient)", cdw, gdw, me.gemmTol(m))
}

// TestGPUBF16Attention: packed causal attention over a bf16 qkv into a
// bf16 output, its backward reading both (float32 gradients), and the KV
// cache path (prefill and decode steps) with qkv, cache and output bf16.
func TestGPUBF16Attention(t *testing.T) {
	e := newOpEnv(t)
	for _, c := range []struct {
		seqs        []int32
		NH, KVH, HS int
		name        string
	}{
		// Head sizes the tensor-core kernels do not take (attention_tc_test.go
		// checks those): these run attention.cu's bf16 kernels.
		{[]int32{0, 5, 6, 40, 107}, 4, 2, 48, "GQA 2:1, HS 48, a 1-token sequence"},
		{[]int32{0, 9, 50}, 6, 3, 40, "HS 40"},
	} {
		T := int(c.seqs[len(c.seqs)-1])
		W := (c.NH + 2*c.KVH) * c.HS
		cq, gq, _ := e.bf16Pair(e.randn(T*W, 1))
		co, gout := e.bf16Zeros(T * c.NH * c.HS)
		cl, gl := e.pair(make([]float32, c.NH*T))
		e.cpu.Attention(co, cl, cq, c.seqs, c.NH, c.KVH, c.HS)
		e.gpu.Attention(gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
		tol := 4*math.Sqrt(float64(c.HS+T))*math.Ldexp(1, -24) + 2e-6
		e.checkBF16Out(c.name+": Attention bf16 → bf16 out", co, gout, tol)
		e.check(c.name+": Attention bf16 lse", cl, gl, tol)
		// The backward reads the output the forward stored: the CPU gets
		// the GPU's bf16 output, so both compute D = rowsum(dO ⊙ O) alike.
		cob := upload(e.cpu, downloadBF16(e.gpu, gout))
		cdy, gdy := e.pair(e.randn(T*c.NH*c.HS, 1))
		cdq, gdq := e.pair(e.randn(T*W, 1)) // garbage: the backward must overwrite all of it
		e.cpu.AttentionBackward(cdq, cdy, cob, cl, cq, c.seqs, c.NH, c.KVH, c.HS)
		e.gpu.AttentionBackward(gdq, gdy, gout, gl, gq, c.seqs, c.NH, c.KVH, c.HS)
		e.check(c.name+": AttentionBackward over bf16 qkv and out: dqkv", cdq, gdq, 20*tol)
	}

	// The KV cache: the same steps as TestGPUAttentionCached (a prefill of
	// two slots, a decode step, a mixed step). The rounded keys and values
	// go into the bf16 cache exactly as the CPU's float32 cache holds them.
	NH, KVH, HS := 14, 2, 64
	slots, maxLen := 4, 64
	W, kvw := (NH+2*KVH)*HS, KVH*HS
	ckc, gkc := e.bf16Zeros(slots * maxLen * kvw)
	cvc, gvc := e.bf16Zeros(slots * maxLen * kvw)
	for s, st := range []struct{ slots, pos0, lens []int32 }{
		{[]int32{2, 0}, []int32{0, 0}, []int32{19, 11}},
		{[]int32{0, 2}, []int32{11, 19}, []int32{1, 1}},
		{[]int32{2, 0, 3}, []int32{20, 12, 0}, []int32{1, 9, 1}},
	} {
		T := 0
		for _, n := range st.lens {
			T += int(n)
		}
		cq, gq, _ := e.bf16Pair(e.randn(T*W, 1))
		co, gout := e.bf16Zeros(T * NH * HS)
		e.cpu.AttentionCached(co, cq, nil, ckc, cvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		e.gpu.AttentionCached(gout, gq, nil, gkc, gvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		tol := 4*math.Sqrt(float64(HS+maxLen))*math.Ldexp(1, -24) + 2e-6
		e.checkBF16Out("AttentionCached bf16, step "+strconv.Itoa(s)+": out", co, gout, tol)
		e.checkRounded("AttentionCached bf16, step "+strconv.Itoa(s)+": key cache", ckc, gkc)
		e.checkRounded("AttentionCached bf16, step "+strconv.Itoa(s)+": value cache", cvc, gvc)
	}
}
