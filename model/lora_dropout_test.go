package model

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/r1go/r1go/model/safetensors"
)

// TestLoRADropoutPyTorchParity runs the PEFT adapters of testdata/lora with
// lora_dropout 0.3 and seed 7 through one training forward and backward
// and checks logprobs, entropies and every lora_A/lora_B gradient against
// make_lora.py's float64 PyTorch values, computed with the same masks
// (the script re-implements DropoutMaskKey/DropoutKeep; the masks it used
// are in the golden file and checked here too). A scoring forward after it
// applies no dropout (PEFT's eval mode): the dropout-free golden values.
func TestLoRADropoutPyTorchParity(t *testing.T) {
	for _, name := range []string{"qwen2_tied", "qwen2_untied"} {
		for _, recompute := range []bool{false, true} {
			gc := loadGoldenCase(t, name)
			m, lo := adaptedGolden(t, name)
			lo.Config.Dropout, lo.Seed = 0.3, 7
			m.Recompute = recompute
			gf, err := safetensors.Open(filepath.Join("testdata", "lora", name+".lora_dropout_golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []float32) {
				t.Helper()
				if e := relErr(got, want); e > 1e-4 || math.IsNaN(e) {
					t.Errorf("%s %s (recompute=%v): relative error %.3g > 1e-4", name, what, recompute, e)
				}
			}
			T := len(gc.tokens)
			for l := range m.d.L {
				for mi, mod := range loraModules {
					ad := lo.adapter(l, mod)
					want := readGolden(t, gf, fmt.Sprintf("mask.model.layers.%d.%s.%s", l, loraBlock(mod), mod))
					k := DropoutMaskKey(7, 1, l, mi)
					for i := range T * ad.in {
						if DropoutKeep(k, i, 0.3) != (want[i] == 1) {
							t.Fatalf("%s: layer %d %s mask element %d differs from the script's", name, l, mod, i)
						}
					}
				}
			}
			b, out := checkAdaptedStep(t, m, lo, gc, gf, check)
			gf.Close()
			// Scoring: no dropout.
			ef, err := safetensors.Open(filepath.Join("testdata", "lora", name+".lora_golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			eout, err := m.Forward(b, false)
			if err != nil {
				t.Fatal(err)
			}
			check("scoring logprob (no dropout)", eout.LogProb, readGolden(t, ef, "logprob"))
			ef.Close()
			// A second training forward draws new masks.
			out2, err := m.Forward(b, true)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(out2.LogProb, out.LogProb) {
				t.Errorf("%s: two training forwards drew the same dropout masks", name)
			}
		}
	}
}

// TestLoRADropoutMaskRate checks the masks' statistics: the dropped share
// within 5 standard deviations of p, and the masks of different keys
// (layers, modules, draws) uncorrelated: both kept in (1−p)² of elements.
func TestLoRADropoutMaskRate(t *testing.T) {
	const n = 1 << 20
	for _, p := range []float64{0.05, 0.1, 0.3, 0.5} {
		keys := []uint64{DropoutMaskKey(1, 1, 0, 0), DropoutMaskKey(1, 1, 0, 1), DropoutMaskKey(1, 1, 1, 0), DropoutMaskKey(1, 2, 0, 0), DropoutMaskKey(2, 1, 0, 0)}
		sd := math.Sqrt(p * (1 - p) / n)
		for ki, k := range keys {
			dropped := 0
			for i := range n {
				if !DropoutKeep(k, i, p) {
					dropped++
				}
			}
			if r := float64(dropped) / n; math.Abs(r-p) > 5*sd {
				t.Errorf("p=%v key %d: dropped share %.5f, want %v ± %.5f", p, ki, r, p, 5*sd)
			}
			if ki == 0 {
				continue
			}
			both := 0
			for i := range n {
				if DropoutKeep(k, i, p) && DropoutKeep(keys[0], i, p) {
					both++
				}
			}
			q := (1 - p) * (1 - p)
			if r := float64(both) / n; math.Abs(r-q) > 5*math.Sqrt(q*(1-q)/n) {
				t.Errorf("p=%v keys 0 and %d: both kept in %.5f of elements, want %.5f (independent masks)", p, ki, r, q)
			}
		}
	}
}

// TestLoRADropoutValidate: p must lie in [0, 1).
func TestLoRADropoutValidate(t *testing.T) {
	for _, p := range []float64{-0.1, 1, math.NaN()} {
		c := LoRAConfig{Rank: 4, Alpha: 8, Dropout: p, TargetModules: []string{"q_proj"}}
		if err := c.Validate(); err == nil {
			t.Errorf("dropout %v accepted", p)
		}
	}
	c := LoRAConfig{Rank: 4, Alpha: 8, Dropout: 0.1, TargetModules: []string{"q_proj"}}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
