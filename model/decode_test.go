package model

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStepSampleCPU: on the CPU device StepSample is Step and SampleToken:
// the kept logits are Step's bit for bit (a second model and cache run
// Step beside it), greedy picks the argmax, and sampled tokens are the
// ones SampleToken draws from a PCG stream seeded by the chunk's seed.
func TestStepSampleCPU(t *testing.T) {
	cfg := tinyConfig(t, true)
	var ms []*Model
	var cs []*KVCache
	for range 2 {
		m, err := New(cfg, NewCPU(), LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(3)
		ms = append(ms, m)
		cs = append(cs, m.NewKVCache(3, 32))
	}
	V := cfg.VocabSize
	chunks := []Chunk{{Slot: 0, Tokens: []int32{1, 2, 3}}, {Slot: 2, Tokens: []int32{4, 5}}}
	for step, s := range []Sampling{Greedy, {Temperature: 0.9, TopP: 0.8, TopK: 5}, {Temperature: 1.2, TopP: 1, TopK: -1}} {
		seeds := []uint64{uint64(step)*7 + 1, uint64(step)*7 + 2}
		got, err := ms[0].StepSample(cs[0], chunks, s, seeds, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		logits, err := ms[1].Step(cs[1], chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Logits, logits[V:2*V]) {
			t.Fatalf("step %d: kept logits differ from Step's", step)
		}
		var scratch []int32
		for j := range chunks {
			rng := rand.New(rand.NewPCG(seeds[j], 0x5eed))
			tok, lp := SampleToken(logits[j*V:(j+1)*V], s, rng, &scratch)
			if got.Tokens[j] != tok || got.LogProbs[j] != lp {
				t.Fatalf("step %d chunk %d: token %d logprob %v, SampleToken %d %v", step, j, got.Tokens[j], got.LogProbs[j], tok, lp)
			}
		}
		next := make([]Chunk, len(chunks))
		for j, c := range chunks {
			next[j] = Chunk{Slot: c.Slot, Tokens: []int32{got.Tokens[j]}}
		}
		chunks = next
	}
	if _, err := ms[0].StepSample(cs[0], chunks, Greedy, []uint64{1}, nil); err == nil {
		t.Error("one seed for two chunks was accepted")
	}
}
