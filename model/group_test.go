package model

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// TestGroupedMatchesWhole runs the golden models' batch with groups of a
// few sequences (GroupBytes lowered so that every batch is grouped; each
// group at least MinGroupRows) and whole,
// with recomputation: the training forward's logprobs and entropies, every
// parameter gradient (adapters with dropout too: their masks must not
// depend on the grouping) and a scoring forward must agree to float32
// rounding (the sums over tokens run in another order). ActivationValues
// must count the arenas' values exactly.
func TestGroupedMatchesWhole(t *testing.T) {
	for _, name := range []string{"qwen2_tied", "qwen2_untied", "qwen3_tied"} {
		for _, lora := range []bool{false, true} {
			if lora && name == "qwen3_tied" {
				continue
			}
			t.Run(fmt.Sprintf("%s lora=%v", name, lora), func(t *testing.T) {
				b, ga, gb := eightCopies(loadGoldenCase(t, name)) // grouped: one copy a group
				run := func(grouped bool) (lp, ent, score, grads []float32) {
					old := GroupBytes
					if grouped {
						GroupBytes = 1
					}
					defer func() { GroupBytes = old }()
					opt := LoadOptions{Frozen: lora}
					m, err := LoadWith(filepath.Join("testdata", "golden", name), NewCPU(), LMHeadOutput, opt)
					if err != nil {
						t.Fatal(err)
					}
					m.Recompute = true
					if lora {
						lo, err := m.LoadAdapter(filepath.Join("testdata", "lora", name+"_adapter"))
						if err != nil {
							t.Fatal(err)
						}
						lo.Config.Dropout, lo.Seed = 0.3, 7
					}
					return trainScore(t, m, b, ga, gb, func() {
						if m.acts.grouped != grouped {
							t.Fatalf("grouped arena %v, want %v", m.acts.grouped, grouped)
						}
						got := m.acts.cap
						if m.acts.grp != nil {
							got += m.acts.grp.cap
						}
						if want := m.ActivationValues(b, true); got != want {
							t.Errorf("arenas hold %d values, ActivationValues says %d", got, want)
						}
						if grouped && len(m.acts.spans) != 8 {
							t.Fatalf("%d groups of the 8 copies", len(m.acts.spans))
						}
					})
				}
				lp0, ent0, sc0, g0 := run(false)
				lp1, ent1, sc1, g1 := run(true)
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"logprob", lp1, lp0}, {"entropy", ent1, ent0}, {"scoring logprob", sc1, sc0}, {"gradients", g1, g0}} {
					if e := relErr(c.got, c.want); !(e <= 1e-5) {
						t.Errorf("grouped %s differs from whole by %.3g relative", c.what, e)
					}
				}
				// Scoring runs the same per-row operations grouped or not:
				// bit for bit (what keeps the default run's old and reference
				// log-probs identical when its micro-batches are grouped).
				for i := range sc0 {
					if math.Float32bits(sc0[i]) != math.Float32bits(sc1[i]) {
						t.Fatalf("grouped scoring logprob %d is %v, whole %v: not bit for bit", i, sc1[i], sc0[i])
					}
				}
				if math.IsNaN(float64(g0[0])) {
					t.Fatal("NaN gradient")
				}
			})
		}
	}
}

// eightCopies is the golden case's batch eight times over (128 tokens, more
// than the products of up to 96 rows that take the narrower kernel), with
// its per-token gradients of the log-probs and entropies.
func eightCopies(gc goldenCase) (b Batch, ga, gb []float32) {
	b = Batch{Seqs: []int32{0}}
	for range 8 {
		for s := 0; s+1 < len(gc.seqs); s++ {
			b.Tokens = append(b.Tokens, gc.tokens[gc.seqs[s]:gc.seqs[s+1]]...)
			b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
		}
		ga, gb = append(ga, gc.a...), append(gb, gc.b...)
	}
	return b, ga, gb
}

// trainScore runs a training forward of b (then check, which may look at
// the arena), the backward of ga and gb, and a scoring forward of b: the
// training log-probs and entropies, the scoring log-probs and every
// trainable gradient.
func trainScore(t *testing.T, m *Model, b Batch, ga, gb []float32, check func()) (lp, ent, score, grads []float32) {
	t.Helper()
	out, err := m.Forward(b, true)
	if err != nil {
		t.Fatal(err)
	}
	check()
	m.ZeroGrads()
	if err := m.Backward(ga, gb, nil); err != nil {
		t.Fatal(err)
	}
	_, g := m.Trainable()
	grads, _ = HostFloat32(g)
	sc, err := m.Forward(b, false)
	if err != nil {
		t.Fatal(err)
	}
	return out.LogProb, out.Entropy, sc.LogProb, grads
}
