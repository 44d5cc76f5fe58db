package cuda

import (
	"math"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// bf16 storage for activations and frozen weights: every op variant that
// reads or writes a bf16 buffer (the residual stream under mixed
// precision, a frozen bf16 model's weights) against the CPU device in
// float32 fed the same values rounded to bf16. A bf16 value widens to
// float32 exactly, so each op is then the float32 op on those inputs: the
// float32 tolerances of device_test.go, and for an op that writes bf16,
// exactly the CPU's float32 result rounded to bf16 (one rounding, |Δ| ≤
// u·|x| with u = 2^−8, against the unrounded result).

// bf16Pair uploads x rounded to bf16 to the CPU (float32) and as bf16 to
// the GPU, and returns the rounded values.
func (e *opEnv) bf16Pair(x []float32) (c model.Buffer, g Buffer, r []float32) {
	r = make([]float32, len(x))
	for i, v := range x {
		r[i] = bf16.Round(v)
	}
	g = e.gpu.AllocType(len(x), BF16)
	e.gpu.Upload(g, x) // rounds on the host
	return upload(e.cpu, r), g, r
}

// checkRounded requires the bf16 GPU buffer g to hold exactly the CPU's
// float32 values of c rounded to bf16.
func (e *opEnv) checkRounded(what string, c model.Buffer, g Buffer) {
	e.t.Helper()
	if err := e.gpu.Sync(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	want, got := download(e.cpu, c), downloadBF16(e.gpu, g)
	for i := range want {
		if got[i] != bf16.Round(want[i]) {
			e.t.Fatalf("%s[%d] = %g, want bf16(%g) = %g", what, i, got[i], want[i], bf16.Round(want[i]))
		}
	}
	e.t.Logf("%s: exactly the CPU's float32 values rounded to bf16 (%d values)", what, len(want))
}

func TestGPUBF16Storage(t *testing.T) {
	e := newOpEnv(t)
	// Add: the residual stream (out and a bf16) plus a float32 branch output.
	n := 10007
	ca, ga, _ := e.bf16Pair(e.randn(n, 1))
	cb, gb := e.pair(e.randn(n, 1))
	co := upload(e.cpu, make([]float32, n))
	e.cpu.Add(co, ca, cb)
	e.gpu.Add(ga, ga, gb) // out aliases a, as in x(l+1) = xmid + branch
	e.checkRounded("Add bf16 = bf16 + f32", co, ga)

	// Embedding into a bf16 residual stream, from a float32 and a bf16 table.
	V, C, T := 300, 96, 200
	ids := make([]int32, T)
	for i := range ids {
		ids[i] = int32(e.rng.IntN(V))
	}
	table := e.randn(V*C, 1)
	ct, gt := e.pair(table)
	ce := upload(e.cpu, make([]float32, T*C))
	ge := e.gpu.AllocType(T*C, BF16)
	e.cpu.Embedding(ce, ids, ct, C)
	e.gpu.Embedding(ge, ids, gt, C)
	e.checkRounded("Embedding f32 table → bf16 rows", ce, ge)
	ctr, gtr, _ := e.bf16Pair(table)
	e.cpu.Embedding(ce, ids, ctr, C)
	e.gpu.Embedding(ge, ids, gtr, C)
	e.checkRounded("Embedding bf16 table → bf16 rows", ce, ge)
	gf := e.gpu.Alloc(T * C)
	e.gpu.Embedding(gf, ids, gtr, C)
	e.check("Embedding bf16 table → f32 rows", ce, gf, 0)

	// RMSNorm and its backward over a bf16 input, with float32 and bf16 weights.
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
			co, gout := e.pair(make([]float32, rows*C))
			cr, gr := e.pair(make([]float32, rows))
			e.cpu.RMSNorm(co, nil, cr, cx, nil, v.cw, rows, C, 1e-6)
			e.gpu.RMSNorm(gout, nil, gr, gx, nil, v.gw, rows, C, 1e-6)
			e.check("RMSNorm bf16 inp, "+v.name+": rstd", cr, gr, tol)
			e.check("RMSNorm bf16 inp, "+v.name+": out", co, gout, tol)
			if v.name != "f32 w" {
				continue // a bf16 weight belongs to a frozen model: no backward
			}
			cdy, gdy := e.pair(e.randn(rows*C, 1))
			cdx, gdx := e.pair(make([]float32, rows*C))
			cdw, gdw := e.pair(e.randn(C, 1))
			e.cpu.RMSNormBackward(cdx, nil, cdw, cdy, cx, cw, cr, nil, rows, C)
			e.gpu.RMSNormBackward(gdx, nil, gdw, gdy, gx, gw, gr, nil, rows, C)
			e.check("RMSNormBackward bf16 inp: dinp", cdx, gdx, 10*tol)
			e.check("RMSNormBackward bf16 inp: dw", cdw, gdw, 10*tol+4*math.Sqrt(float64(rows))*math.Ldexp(1, -24))
		}
	}

	// AddBias with a frozen model's bf16 bias; Gemm of float32 activations
	// with bf16 weights (the activations rounded on their way in): against
	// the CPU fed both rounded, float32 accumulation either way.
	rows, cols, ld := 77, 130, 150
	bias := e.randn(cols, 1)
	cbr, gbr, _ := e.bf16Pair(bias)
	out := e.randn(rows*ld, 1)
	cout, gout := e.pair(out)
	e.cpu.AddBias(cout, ld, cbr, rows, cols)
	e.gpu.AddBias(gout, ld, gbr, rows, cols)
	e.check("AddBias bf16 bias", cout, gout, 0)
	m, k := 50, 256
	x := e.randn(m*k, 1)
	cxr, _, _ := e.bf16Pair(x)
	_, gx := e.pair(x)
	cwr, gwr, _ := e.bf16Pair(e.randn(cols*k, 1))
	cc, gc := e.pair(make([]float32, m*cols))
	e.cpu.Gemm(false, true, m, cols, k, 1, cxr, k, cwr, k, 0, cc, cols)
	e.gpu.Gemm(false, true, m, cols, k, 1, gx, k, gwr, k, 0, gc, cols)
	e.check("Gemm f32 a · bf16 wᵀ", cc, gc, e.gemmTol(k)+4*math.Sqrt(float64(k))*math.Ldexp(1, -24))
}
