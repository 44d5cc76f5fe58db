package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkExpOps times the ops that take e^x through expInto at
// Qwen2.5-0.5B's shapes, each with the vector kernel and then with exp32
// element by element (expNoVector: the former loops), alternating in the
// same run, and reports the ratio vector ÷ scalar of the best times
// (go test -run XXX -bench ExpOps -benchtime 3x ./model/cpu). The LM head row
// is forward + backward of one 128-token block against the full
// 151,936-entry head (products included, dW skipped); SwiGLU is forward
// + backward of a 640-token micro-batch.
func BenchmarkExpOps(b *testing.B) {
	d := New().(*Device[float32])
	rng := rand.New(rand.NewPCG(1, 1))
	const T, C, V = 128, 896, 151936
	h, w := cpuBuf[float32](randF32(rng, T*C, 1)), cpuBuf[float32](randF32(rng, V*C, 0.05))
	targets := make([]int32, T)
	for i := range targets {
		targets[i] = int32(rng.IntN(V))
	}
	lp, ent, lse, dh := make(cpuBuf[float32], T), make(cpuBuf[float32], T), make(cpuBuf[float32], T), make(cpuBuf[float32], T*C)
	glp, gent := cpuBuf[float32](randF32(rng, T, 1)), cpuBuf[float32](randF32(rng, T, 1))
	const rows, I = 640, 4864
	gu, out := cpuBuf[float32](randF32(rng, rows*2*I, 2)), make(cpuBuf[float32], rows*I)
	dout, dgu := cpuBuf[float32](randF32(rng, rows*I, 1)), make(cpuBuf[float32], rows*2*I)
	src, dst := randF32(rng, V, 3), make([]float32, V)
	hs, ws := cpuBuf[float32](randF32(rng, T*16, 1)), cpuBuf[float32](randF32(rng, V*16, 0.5))
	ops := []struct {
		name string
		run  func()
	}{
		{"expInto 151936", func() { exp32Into(dst, src) }},
		{"LM head fwd+bwd T128 C16 V151936", func() {
			d.LMHead(lp, ent, lse, nil, hs, ws, targets, T, 16, V)
			d.LMHeadBackward(dh[:T*16], nil, glp, gent, nil, hs, ws, lse, ent, targets, T, 16, V)
		}},
		{"LM head fwd+bwd T128 C896 V151936", func() {
			d.LMHead(lp, ent, lse, nil, h, w, targets, T, C, V)
			d.LMHeadBackward(dh, nil, glp, gent, nil, h, w, lse, ent, targets, T, C, V)
		}},
		{"SwiGLU fwd+bwd 640x4864", func() {
			d.SwiGLU(out, gu, rows, I)
			d.SwiGLUBackward(dgu, dout, gu, rows, I)
		}},
	}
	best := make([][2]time.Duration, len(ops))
	for i := range best {
		best[i] = [2]time.Duration{1 << 62, 1 << 62}
	}
	defer func() { expNoVector = false }()
	for b.Loop() {
		for i, op := range ops {
			for v, scalar := range []bool{false, true} {
				expNoVector = scalar
				t0 := time.Now()
				op.run()
				best[i][v] = min(best[i][v], time.Since(t0))
			}
		}
	}
	for i, op := range ops {
		fmt.Printf("%-36s vector %8.1f ms  scalar %8.1f ms  vector/scalar %.3f\n", op.name,
			best[i][0].Seconds()*1e3, best[i][1].Seconds()*1e3, best[i][0].Seconds()/best[i][1].Seconds())
		b.ReportMetric(best[i][0].Seconds()/best[i][1].Seconds(), fmt.Sprintf("ratio-%d", i))
	}
}
