package cuda

import (
	"math"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// TestGPUAdamWMomentsBF16 runs five AdamW steps with both moments stored as
// bf16 (optim state_dtype bfloat16: AllocBF16 on each device) on the CPU
// and the GPU from the same weights, gradients and moments, the GPU's
// weights registered for mixed precision. The GPU kernel is the CPU's step
// (double arithmetic, the same hashed random bits for the stochastic
// rounding), so the stated bounds are tight: master weights within 1e-6
// relative (the CPU's and the GPU's double arithmetic differ by at most
// fused multiply-adds), each stored moment equal to the CPU's or one bf16
// step from it (a value at a rounding boundary), and the bf16 compute copy
// exactly the new masters rounded to bf16.
func TestGPUAdamWMomentsBF16(t *testing.T) {
	e := newMixedEnv(t)
	n := 50021
	cp, gp := e.pair(e.randn(n, 1))
	e.gpu.UseBF16(gp)
	allocBF16 := func(n int) model.Buffer {
		b, ok := model.AllocAs(e.cpu, n, model.StoreBF16)
		if !ok {
			t.Fatal("the CPU device has no bf16 storage")
		}
		return b
	}
	m0, v0 := e.randn(n, 0.01), e.randn(n, 0.001)
	for i := range v0 {
		v0[i] = v0[i] * v0[i]
	}
	var cm, cv, gm, gv model.Buffer = allocBF16(n), allocBF16(n), e.gpu.AllocBF16(n), e.gpu.AllocBF16(n)
	e.cpu.Upload(cm, m0)
	e.cpu.Upload(cv, v0)
	e.gpu.Upload(gm, m0)
	e.gpu.Upload(gv, v0)
	for step := 1; step <= 5; step++ {
		cg, gg := e.pair(e.randn(n, 1))
		hp := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: step, GradScale: 0.5}
		e.cpu.AdamW(cp, cg, cm, cv, hp)
		e.gpu.AdamW(gp, gg, gm, gv, hp)
		e.check("AdamW bf16 moments: masters", cp, gp, 1e-6)
		for name, b := range map[string][2]model.Buffer{"m": {cm, gm}, "v": {cv, gv}} {
			want, got := download(e.cpu, b[0]), download(e.gpu, b[1])
			off := 0
			for i := range want {
				if got[i] != want[i] {
					off++
					if ulp := math.Abs(float64(bf16.Round(want[i])) - float64(want[i])); math.Abs(float64(got[i]-want[i])) > math.Ldexp(math.Abs(float64(want[i])), -7)+ulp {
						t.Fatalf("step %d: %s[%d] = %g on the GPU, %g on the CPU: more than one bf16 step apart", step, name, i, got[i], want[i])
					}
				}
			}
			t.Logf("step %d: bf16 %s: %d of %d values differ from the CPU's (by one bf16 step)", step, name, off, n)
		}
		bf, _ := e.gpu.WeightsBF16(gp)
		copyVals, masters := downloadBF16(e.gpu, bf), download(e.gpu, gp)
		for i := range masters {
			if copyVals[i] != bf16.Round(masters[i]) {
				t.Fatalf("step %d: bf16 copy[%d] = %g, want bf16(%g)", step, i, copyVals[i], masters[i])
			}
		}
	}
}

// TestGPUOptimStateBF16 is optim.AdamW with state_dtype bfloat16 on both
// devices (its moments from AllocBF16, the gradient-norm clipping, the
// schedule): three steps from the same weights and gradients must leave
// the GPU's weights within 1e-6 relative of the CPU's (the bound of
// TestGPUAdamWMomentsBF16, whose kernel this runs).
func TestGPUOptimStateBF16(t *testing.T) {
	e := newOpEnv(t)
	n := 30011
	cp, gp := e.pair(e.randn(n, 1))
	cfg := optim.DefaultConfig()
	cfg.StateDType, cfg.GradClip = "bfloat16", 1
	var opts [2]*optim.AdamW
	var grads [2]model.Buffer
	grads[0], grads[1] = e.pair(make([]float32, n))
	for k, d := range []model.Device{e.cpu, e.gpu} {
		p := []model.Buffer{cp, gp}[k]
		o, err := optim.New(d, p, grads[k], cfg, 10)
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		opts[k] = o
	}
	for step := 0; step < 3; step++ {
		g := e.randn(n, 0.1)
		e.cpu.Upload(grads[0], g)
		e.gpu.Upload(grads[1], g)
		r0, r1 := opts[0].Step(1), opts[1].Step(1)
		if r0.Skipped || r1.Skipped {
			t.Fatalf("step %d skipped (CPU %v, GPU %v)", step, r0.Skipped, r1.Skipped)
		}
		e.check("optim bf16 state: weights", cp, gp, 1e-6)
	}
}
