package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// stepShare is -step: the actor loss head's share of a whole RL step's actor
// update, both timed in this run on one batch shaped like a step of the
// embedded default run (64 trajectories of about 700 tokens; the tiny
// Qwen2 of cmd/train: hidden 192, 3 layers, vocabulary 2070, micro-batches
// of 16384 tokens). The update's model work is the training forward pass
// and the backward pass over every micro-batch; the loss head is ActorLoss
// with the default run's settings and with GRPO's entropy and KL terms.
// Each figure is the minimum of reps runs. The measurement (6.5e-7 of the
// update, benchmarks/rl.md) is why the vanilla loss has no fast path.
func stepShare(device string, seqs, length, reps int) error {
	const vocab = 2070
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 192,
		"intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 6,
		"num_key_value_heads": 2, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": %d, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "torch_dtype": "float32", "eos_token_id": [1, 2]}`, vocab, length+1)
	cfg, err := model.ParseConfig([]byte(raw), "step benchmark model")
	if err != nil {
		return err
	}
	dev, err := devsel.Pick(device, os.Stderr)
	if err != nil {
		return err
	}
	m, err := model.New(cfg, dev, model.LMHeadOutput)
	if err != nil {
		return err
	}
	m.InitRandom(1)
	b := makeBatch(seqs, length)
	rng := rand.New(rand.NewPCG(7, 7))
	b.Tokens = make([]int32, b.NumTokens())
	for i := range b.Tokens {
		b.Tokens[i] = int32(rng.IntN(vocab))
	}
	const microTokens = 16384
	cuts := rl.MicroBatches(b, microTokens)
	update := func() error {
		m.ZeroGrads()
		for j := 0; j+1 < len(cuts); j++ {
			mb := b.Slice(cuts[j], cuts[j+1])
			seqs := make([]int32, len(mb.Offsets))
			for i, o := range mb.Offsets {
				seqs[i] = int32(o)
			}
			if _, err := m.Forward(model.Batch{Tokens: mb.Tokens, Seqs: seqs}, true); err != nil {
				return err
			}
			n := mb.NumTokens()
			if err := m.Backward(make([]float32, n), make([]float32, n), nil); err != nil {
				return err
			}
		}
		return nil
	}
	loss := func(mutate func(*rl.LossConfig)) func() error {
		c := rl.DefaultLossConfig()
		mutate(&c)
		norm, err := rl.NewNorm(c.AggMode, b, 0)
		if err != nil {
			panic(err)
		}
		out := &rl.Output{}
		return func() error { return rl.ActorLoss(b, &c, norm, out) }
	}
	best := func(f func() error) (time.Duration, error) {
		var min time.Duration
		for r := 0; r < reps; r++ {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			if d := time.Since(t0); r == 0 || d < min {
				min = d
			}
		}
		return min, nil
	}
	upd, err := best(update)
	if err != nil {
		return err
	}
	fmt.Printf("step batch: %d sequences × %d tokens = %d tokens in %d micro-batches\n",
		seqs, length, b.NumTokens(), len(cuts)-1)
	fmt.Printf("actor update, model forward+backward: %.1f ms\n", float64(upd.Microseconds())/1e3)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"ActorLoss, default run (vanilla, no entropy or KL term)", loss(func(*rl.LossConfig) {})},
		{"ActorLoss, GRPO (vanilla + entropy + k3 KL loss)", loss(func(c *rl.LossConfig) { c.EntropyCoeff, c.UseKLLoss = 0.001, true })},
	} {
		d, err := best(c.f)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %.3f ms = %.2e of the update\n", c.name, float64(d.Microseconds())/1e3, d.Seconds()/upd.Seconds())
	}
	return nil
}
