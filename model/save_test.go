package model

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// TestPartialSaveBitForBit trains the golden models' batch (one forward
// and backward) saving every layer and the LM head's logits, every layer
// without the logits, none (Recompute), and k of L for each k in between
// (SaveBytes set to k+1 layer sets: k saved, one shared), on the golden
// weights and on a random 5-layer model of each config: the
// log-probabilities and every gradient must be bit for bit the same,
// since a recomputed layer or logit runs the same operations on the same
// inputs. The gradients after a second Backward of the same forward too
// (the kept logits, which the first overwrote, are computed again).
// The arena must hold what ActivationValues says, and the number of layers
// saved must be what the bound allows.
func TestPartialSaveBitForBit(t *testing.T) {
	for _, name := range []string{"qwen2_tied", "qwen2_untied", "qwen3_tied"} {
		for _, c := range []struct {
			lora   bool
			layers int // 0: the golden model; else random weights
		}{{false, 0}, {true, 0}, {false, 5}} {
			lora := c.lora
			if lora && name == "qwen3_tied" {
				continue
			}
			t.Run(fmt.Sprintf("%s lora=%v layers=%d", name, lora, c.layers), func(t *testing.T) {
				dir := filepath.Join("testdata", "golden", name)
				load := func(frozen bool) *Model {
					if c.layers == 0 {
						m, err := LoadWith(dir, NewCPU(), LMHeadOutput, LoadOptions{Frozen: frozen})
						if err != nil {
							t.Fatal(err)
						}
						return m
					}
					cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
					if err != nil {
						t.Fatal(err)
					}
					cfg.NumHiddenLayers = c.layers
					m, err := New(cfg, NewCPU(), LMHeadOutput)
					if err != nil {
						t.Fatal(err)
					}
					m.InitRandom(11)
					return m
				}
				gc := loadGoldenCase(t, name)
				b := Batch{Tokens: gc.tokens, Seqs: gc.seqs}
				run := func(recompute bool, saveBytes int64) (lp []float32, grads []float32, nsaved int, logits bool) {
					m := load(lora)
					m.Recompute, m.SaveBytes = recompute, saveBytes
					if lora {
						lo, err := m.LoadAdapter(filepath.Join("testdata", "lora", name+"_adapter"))
						if err != nil {
							t.Fatal(err)
						}
						lo.Config.Dropout, lo.Seed = 0.3, 7
					}
					out, err := m.Forward(b, true)
					if err != nil {
						t.Fatal(err)
					}
					if m.acts.grouped {
						t.Fatal("the golden batch ran grouped")
					}
					if want := m.ActivationValues(b, true); m.acts.cap != want {
						t.Errorf("arena holds %d values, ActivationValues says %d", m.acts.cap, want)
					}
					logits = m.acts.logits != nil
					m.ZeroGrads()
					if err := m.Backward(gc.a, gc.b, nil); err != nil {
						t.Fatal(err)
					}
					_, g := m.Trainable()
					grads, _ = HostFloat32(g)
					grads = append([]float32(nil), grads...)
					// A second Backward accumulates on the first: the kept
					// logits are gradients by now, so it computes them again.
					if err := m.Backward(gc.a, gc.b, nil); err != nil {
						t.Fatal(err)
					}
					_, g = m.Trainable()
					twice, _ := HostFloat32(g)
					grads = append(grads, twice...)
					return out.LogProb, grads, m.acts.nsaved, logits
				}
				lp0, g0, n, kept := run(false, 1<<40)
				if !kept {
					t.Fatal("an unbounded save did not keep the logits")
				}
				L := n
				probe := load(true)
				if L != probe.d.L || L < 2 {
					t.Fatalf("all saved: nsaved %d of %d layers", L, probe.d.L)
				}
				per := int64(layerActSize(probe.d, len(b.Tokens))) * 4
				same := func(what string, lp, g []float32) {
					t.Helper()
					for i := range g0 {
						if math.Float32bits(g[i]) != math.Float32bits(g0[i]) {
							t.Fatalf("%s: gradient %d is %v, every layer saved gives %v", what, i, g[i], g0[i])
						}
					}
					for i := range lp0 {
						if math.Float32bits(lp[i]) != math.Float32bits(lp0[i]) {
							t.Fatalf("%s: logprob %d is %v, every layer saved gives %v", what, i, lp[i], lp0[i])
						}
					}
				}
				lp, g, n, kept := run(true, 1<<40)
				if n != 0 || kept {
					t.Fatalf("Recompute saved %d layers, logits %v", n, kept)
				}
				same("recompute", lp, g)
				lp, g, n, kept = run(false, int64(L)*per)
				if n != L || kept {
					t.Fatalf("a bound of L layer sets saved %d layers, logits %v; want %d, none", n, kept, L)
				}
				same("every layer, no logits", lp, g)
				for k := 0; k < L-1; k++ {
					lp, g, n, kept := run(false, int64(k+1)*per)
					if n != k || kept {
						t.Fatalf("a bound of %d layer sets saved %d layers, logits %v; want %d, none", k+1, n, kept, k)
					}
					same(fmt.Sprintf("%d of %d saved", k, L), lp, g)
				}
				if math.IsNaN(float64(g0[0])) {
					t.Fatal("NaN gradient")
				}
			})
		}
	}
}
