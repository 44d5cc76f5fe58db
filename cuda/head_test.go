package cuda

import (
	"math"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestGPUScoredHeadTracksCPU runs a training forward and backward with the
// LM head on every third row (model.Batch.Scored: the rows gathered into
// the layers' scratch and the head's gradient scattered back with the
// embedding kernels), whole and grouped, on both devices from the same
// weights: the scored rows' log-probs must agree, the others be 0, and
// the gradients agree with the CPU's.
func TestGPUScoredHeadTracksCPU(t *testing.T) {
	gpu := gpuOrSkip(t)
	cfg := tinyQwen(t)
	seqs := []int32{0, 40, 41, 97, 160}
	tokens := make([]int32, 160)
	for i := range tokens {
		tokens[i] = int32((i*7919 + 13) % cfg.VocabSize)
	}
	var scored []int32
	dlp := make([]float32, len(tokens))
	for i := 0; i < len(tokens); i += 3 {
		scored = append(scored, int32(i))
		dlp[i] = float32(1+i%5) / 100
	}
	b := model.Batch{Tokens: tokens, Seqs: seqs, Scored: scored}
	for _, grouped := range []bool{false, true} {
		run := func(d model.Device) ([]float32, []float32) {
			old := model.GroupBytes
			if grouped {
				model.GroupBytes = 1
			}
			defer func() { model.GroupBytes = old }()
			m, err := model.New(cfg, d, model.LMHeadOutput)
			if err != nil {
				t.Fatal(err)
			}
			m.InitRandom(5)
			m.Recompute = grouped
			out, err := m.Forward(b, true)
			if err != nil {
				t.Fatal(err)
			}
			m.ZeroGrads()
			if err := m.Backward(dlp, nil, nil); err != nil {
				t.Fatal(err)
			}
			return out.LogProb, download(d, m.Grads)
		}
		lpC, gC := run(cpu.New())
		lpG, gG := run(gpu)
		on := map[int]bool{}
		for _, s := range scored {
			on[int(s)] = true
		}
		for i := range lpC {
			if !on[i] && (lpG[i] != 0 || lpC[i] != 0) {
				t.Fatalf("grouped %v: row %d is not scored but has log-prob GPU %v, CPU %v", grouped, i, lpG[i], lpC[i])
			}
			if d := math.Abs(float64(lpG[i] - lpC[i])); !(d <= 1e-4) {
				t.Errorf("grouped %v: log-prob %d GPU %v, CPU %v", grouped, i, lpG[i], lpC[i])
			}
		}
		var num, den float64
		for i := range gC {
			num += math.Abs(float64(gG[i] - gC[i]))
			den += math.Abs(float64(gC[i]))
		}
		if !(den > 0) || !(num/den <= 1e-4) {
			t.Errorf("grouped %v: gradients differ by %.3g relative (L1 %v)", grouped, num/den, den)
		}
	}
}
