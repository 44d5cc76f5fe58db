package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/r1go/r1go/model"
)

// The RL step of the table: the phases of rl.Trainer.Step on the same
// model calls the trainer makes (a rollout through the KV cache with
// device sampling, two scoring forwards, one update), without the
// environment, whose tools cost nothing here. Its shapes are the
// transformers side's: 32 prompts × 8 samples of 256 + 256 tokens.
var (
	rlPrompts, rlSamples = 32, 8
	rlPromptLen, rlResp  = 256, 256
	rlMicroTokens        = 16384 // actor.micro_batch_tokens' default
)

const rlClip, rlKLCoef = 0.2, 1e-3

func rlStep(m *model.Model) (map[string]any, error) {
	ref, err := m.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		return nil, err
	}
	opt := newOptimizer(m)
	// The first step warms up (kernel loads, arenas, graph capture); the
	// second is timed, as on the transformers side.
	if _, err := rlOnce(m, ref, opt, 1); err != nil {
		return nil, err
	}
	return rlOnce(m, ref, opt, 2)
}

func rlOnce(m, ref *model.Model, opt *optimizer, seed uint64) (map[string]any, error) {
	n, L := rlPrompts*rlSamples, rlPromptLen+rlResp
	rng := rand.New(rand.NewPCG(seed, 7))
	seqs := make([][]int32, n)
	phases := map[string]float64{}
	var err error

	// Rollout: each group's leader prefills its prompt but the last token,
	// the other samples copy its cache slot, and every slot then decodes
	// from the prompt's last token for 256 sampled tokens.
	phases["gen"], err = timed(m.Dev, func() error {
		c := m.NewKVCache(n, L+1)
		defer c.Free(m.Dev)
		dec := model.NewDecoder(m, c)
		defer dec.Free()
		var lead []model.Chunk
		for g := range rlPrompts {
			p := randomTokens(rng, rlPromptLen, m.Config.VocabSize)
			for s := range rlSamples {
				seqs[g*rlSamples+s] = append(make([]int32, 0, L), p...)
			}
			lead = append(lead, model.Chunk{Slot: g * rlSamples, Tokens: p[:rlPromptLen-1]})
		}
		if _, err := m.Step(c, lead); err != nil {
			return err
		}
		for g := range rlPrompts {
			for s := 1; s < rlSamples; s++ {
				c.CopySlot(m.Dev, g*rlSamples+s, g*rlSamples)
			}
		}
		sampling := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
		chunks := make([]model.Chunk, n)
		seeds := make([]uint64, n)
		for t := range rlResp {
			for i := range chunks {
				chunks[i] = model.Chunk{Slot: i, Tokens: seqs[i][len(seqs[i])-1:]}
				seeds[i] = seed<<40 | uint64(i)<<20 | uint64(t)
			}
			out, err := dec.Step(chunks, sampling, seeds, nil)
			if err != nil {
				return err
			}
			for i := range seqs {
				seqs[i] = append(seqs[i], out.Tokens[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}

	// Micro-batches of whole sequences, actor.micro_batch_tokens each.
	per := rlMicroTokens / L
	var batches []model.Batch
	for i := 0; i < n; i += per {
		b := model.Batch{Seqs: []int32{0}}
		for _, s := range seqs[i:min(i+per, n)] {
			b.Tokens = append(b.Tokens, s...)
			b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
		}
		batches = append(batches, b)
	}
	score := func(mm *model.Model) ([][]float32, error) {
		var lps [][]float32
		for _, b := range batches {
			out, err := mm.Forward(b, false)
			if err != nil {
				return nil, err
			}
			lps = append(lps, out.LogProb)
		}
		return lps, nil
	}
	var old, refLP [][]float32
	phases["old_log_prob"], err = timed(m.Dev, func() (err error) { old, err = score(m); return })
	if err != nil {
		return nil, fmt.Errorf("old log-probabilities: %w", err)
	}
	phases["ref"], err = timed(m.Dev, func() (err error) { refLP, err = score(ref); return })
	if err != nil {
		return nil, fmt.Errorf("reference log-probabilities: %w", err)
	}

	// GRPO advantages of random rewards, one per sequence.
	adv := make([]float64, n)
	for g := range rlPrompts {
		r := make([]float64, rlSamples)
		var mean, sd float64
		for s := range r {
			r[s] = rng.NormFloat64()
			mean += r[s] / float64(rlSamples)
		}
		for _, v := range r {
			sd += (v - mean) * (v - mean) / float64(rlSamples-1)
		}
		for s, v := range r {
			adv[g*rlSamples+s] = (v - mean) / (math.Sqrt(sd) + 1e-6)
		}
	}
	// The update: PPO-clip plus the low-variance KL (k3) to the reference,
	// token-mean over every response token of the step, one AdamW step.
	tokens := float64(n * rlResp)
	phases["update_actor"], err = timed(m.Dev, func() error {
		m.ZeroGrads()
		for k, b := range batches {
			out, err := m.Forward(b, true)
			if err != nil {
				return err
			}
			dlp := make([]float32, len(b.Tokens))
			for j := 0; j+1 < len(b.Seqs); j++ {
				a := adv[k*per+j]
				for t := int(b.Seqs[j]) + rlPromptLen - 1; t < int(b.Seqs[j+1])-1; t++ {
					ratio := math.Exp(float64(out.LogProb[t] - old[k][t]))
					g := rlKLCoef * (1 - math.Exp(float64(refLP[k][t]-out.LogProb[t])))
					if clipped := a > 0 && ratio > 1+rlClip || a < 0 && ratio < 1-rlClip; !clipped {
						g -= a * ratio
					}
					dlp[t] = float32(g / tokens)
				}
			}
			if err := m.Backward(dlp, nil, nil); err != nil {
				return err
			}
		}
		opt.apply(m, 1e-6)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	var total float64
	for _, t := range phases {
		total += t
	}
	fmt.Printf("rl step %d: gen %.2f s, old %.2f s, ref %.2f s, update %.2f s: %.0f tokens/s\n", seed,
		phases["gen"], phases["old_log_prob"], phases["ref"], phases["update_actor"], float64(n*L)/total)
	return map[string]any{"sequences": n, "prompt": rlPromptLen, "response": rlResp, "micro_batch_tokens": rlMicroTokens,
		"phases_s": phases, "step_s": total, "tokens": n * L, "throughput_tok_s": float64(n*L) / total}, nil
}
