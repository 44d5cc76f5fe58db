package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// TestScoredMatchesWhole runs the golden models' batch (eight copies) with
// the LM head on a third of the rows (Batch.Scored) and on all of them,
// whole and grouped, with every layer saved (the head's logits kept) and
// with recomputation, and under adapters: the scored rows' log-probs and
// entropies must be the whole head's bit for bit, in training and in
// scoring, the other rows 0; every parameter gradient, from gradients that
// are zero off the scored rows, must agree to float32 rounding (the LM
// head's weight gradient sums fewer zero rows, in another order).
func TestScoredMatchesWhole(t *testing.T) {
	for _, c := range []struct {
		name                     string
		lora, recompute, grouped bool
	}{
		{"qwen2_tied", false, false, false},
		{"qwen2_untied", false, false, false},
		{"qwen2_untied", false, true, false},
		{"qwen2_untied", false, true, true},
		{"qwen3_tied", false, true, true},
		{"qwen2_tied", true, false, false},
		{"qwen2_tied", true, true, true},
	} {
		t.Run(fmt.Sprintf("%s lora=%v recompute=%v grouped=%v", c.name, c.lora, c.recompute, c.grouped), func(t *testing.T) {
			b, ga, gb := eightCopies(loadGoldenCase(t, c.name))
			rng := rand.New(rand.NewPCG(3, uint64(len(b.Tokens))))
			var scored []int32
			for t := range b.Tokens {
				if rng.IntN(3) == 0 {
					scored = append(scored, int32(t))
				}
			}
			in := make([]bool, len(b.Tokens))
			for _, t := range scored {
				in[t] = true
			}
			for t := range ga {
				if !in[t] {
					ga[t], gb[t] = 0, 0
				}
			}
			run := func(scored []int32) (lp, ent, score, grads []float32) {
				old := GroupBytes
				if c.grouped {
					GroupBytes = 1
				}
				defer func() { GroupBytes = old }()
				m, err := LoadWith(filepath.Join("testdata", "golden", c.name), NewCPU(), LMHeadOutput, LoadOptions{Frozen: c.lora})
				if err != nil {
					t.Fatal(err)
				}
				m.Recompute = c.recompute
				if c.lora {
					if _, err := m.LoadAdapter(filepath.Join("testdata", "lora", c.name+"_adapter")); err != nil {
						t.Fatal(err)
					}
				}
				bb := b
				bb.Scored = scored
				return trainScore(t, m, bb, ga, gb, func() {
					if m.acts.grouped != c.grouped {
						t.Fatalf("grouped arena %v, want %v", m.acts.grouped, c.grouped)
					}
					if kept := m.acts.logits != nil; kept == c.recompute {
						t.Fatalf("logits kept %v with recompute %v", kept, c.recompute)
					}
				})
			}
			lp0, ent0, sc0, g0 := run(nil)
			lp1, ent1, sc1, g1 := run(scored)
			for _, o := range []struct {
				what      string
				got, want []float32
			}{{"logprob", lp1, lp0}, {"entropy", ent1, ent0}, {"scoring logprob", sc1, sc0}} {
				for i := range o.want {
					want := o.want[i]
					if !in[i] {
						want = 0
					}
					if math.Float32bits(o.got[i]) != math.Float32bits(want) {
						t.Fatalf("scored %s at %d (scored %v) is %v, want %v", o.what, i, in[i], o.got[i], want)
					}
				}
			}
			if e := relErr(g1, g0); !(e <= 1e-5) {
				t.Errorf("gradients with scored rows differ from the whole head's by %.3g relative", e)
			}
			var norm float64
			for _, v := range g0 {
				norm += float64(v) * float64(v)
			}
			if !(norm > 0) {
				t.Fatalf("gradient norm² %v: nothing was checked", norm)
			}
		})
	}
}

// TestScoredErrors: positions out of order or outside the batch, and a
// gradient at a row the head did not score, are errors that name them.
func TestScoredErrors(t *testing.T) {
	gc := loadGoldenCase(t, "qwen2_tied")
	m, err := Load(filepath.Join("testdata", "golden", "qwen2_tied"), NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	T := len(gc.tokens)
	for _, c := range []struct {
		scored []int32
		want   string
	}{
		{[]int32{3, 2}, "not increasing at entry 1"},
		{[]int32{1, 1}, "not increasing"},
		{[]int32{0, int32(T)}, fmt.Sprintf("scored position %d (entry 1) is outside the batch's %d tokens", T, T)},
		{[]int32{-1}, "scored position -1"},
	} {
		_, err := m.Forward(Batch{Tokens: gc.tokens, Seqs: gc.seqs, Scored: c.scored}, true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Scored %v: error %v, want one with %q", c.scored, err, c.want)
		}
	}
	if _, err := m.Forward(Batch{Tokens: gc.tokens, Seqs: gc.seqs, Scored: []int32{2, 5}}, true); err != nil {
		t.Fatal(err)
	}
	g := make([]float32, T)
	g[5], g[7] = 1, 0.5
	err = m.Backward(g, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "dLogProb is 0.5 at position 7, which the batch does not score") {
		t.Fatalf("a gradient off the scored rows: error %v", err)
	}
	g[7] = 0
	if err := m.Backward(g, nil, nil); err != nil {
		t.Fatal(err)
	}
	// No scored row at all: zero outputs and no gradient through the head.
	out, err := m.Forward(Batch{Tokens: gc.tokens, Seqs: gc.seqs, Scored: []int32{}}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out.LogProb {
		if v != 0 || out.Entropy[i] != 0 {
			t.Fatalf("no scored rows: output %d is %v, %v", i, v, out.Entropy[i])
		}
	}
	m.ZeroGrads()
	if err := m.Backward(make([]float32, T), nil, nil); err != nil {
		t.Fatal(err)
	}
}
