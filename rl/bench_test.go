package rl

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkActorLoss times the vanilla PPO actor loss on 64 sequences of 4096
// tokens; benchmarks/rl reports the same against a same-run bandwidth probe.
func BenchmarkActorLoss(bm *testing.B) {
	rng := rand.New(rand.NewPCG(41, 42))
	b := randomBatch(rng, 512)
	for len(b.ActionMask) < 64*4096 {
		b = appendBatch(b, randomBatch(rng, 512))
	}
	cfg := DefaultLossConfig()
	b.Entropy, b.Tokens = nil, nil
	norm, _ := NewNorm(cfg.AggMode, b, 0)
	var out Output
	bm.SetBytes(int64(len(b.LogProb) * 25))
	for bm.Loop() {
		if err := ActorLoss(b, &cfg, norm, &out); err != nil {
			bm.Fatal(err)
		}
	}
}

// appendBatch concatenates the fields the benchmark uses.
func appendBatch(a, b *Batch) *Batch {
	n := a.NumTokens()
	for _, o := range b.Offsets[1:] {
		a.Offsets = append(a.Offsets, n+o)
	}
	a.PromptLen = append(a.PromptLen, b.PromptLen...)
	a.Group = append(a.Group, b.Group...)
	a.ActionMask = append(a.ActionMask, b.ActionMask...)
	a.AdvantageMask = a.ActionMask
	a.LogProb = append(a.LogProb, b.LogProb...)
	a.OldLogProb = append(a.OldLogProb, b.OldLogProb...)
	a.RefLogProb = append(a.RefLogProb, b.RefLogProb...)
	a.Advantages = append(a.Advantages, b.Advantages...)
	a.Entropy = append(a.Entropy, b.Entropy...)
	return a
}
