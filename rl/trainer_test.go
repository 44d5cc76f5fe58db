package rl

import (
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// TestUpdateDirection checks the sign chain from advantages to weights:
// after one GRPO actor update, the sequence with the positive advantage is
// more likely under the policy and the one with the negative advantage less.
func TestUpdateDirection(t *testing.T) {
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 16,
		"intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": 23, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.2,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "test config")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.NewCPU(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(3)
	trajs := []*Trajectory{
		{Tokens: []int32{1, 2, 3, 4, 5, 6, 7}, PromptLen: 3, Action: []bool{false, false, false, true, true, false, true}, LogProb: make([]float32, 7)},
		{Tokens: []int32{1, 2, 3, 8, 9, 10, 11}, PromptLen: 3, Action: []bool{false, false, false, true, true, false, true}, LogProb: make([]float32, 7)},
	}
	b := FromTrajectories(trajs, true)
	if err := AddOutcome(b, []float64{1, 0}); err != nil {
		t.Fatal(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		t.Fatal(err)
	}
	c := DefaultTrainerConfig()
	c.Actor.UseKLLoss = false
	c.Actor.Optim.LR, c.Actor.Optim.WeightDecay = 1e-2, 0
	adv := AdvantageConfig{Estimator: "grpo", Gamma: 1, Lambda: 1, NormAdvByStd: true}
	if err := Estimate(b, &adv); err != nil {
		t.Fatal(err)
	}
	opt, err := optim.New(m.Dev, m.Params, m.Grads, c.Actor.Optim, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trainer{Cfg: c, Policy: m, ActorOpt: opt}
	seqLogProb := func() (float64, float64) {
		lp, _, _, err := Forward(m, b, 1024)
		if err != nil {
			t.Fatal(err)
		}
		var s [2]float64
		for i := 0; i < 2; i++ {
			lo, hi := b.Seq(i)
			for k := lo; k < hi; k++ {
				if b.ActionMask[k] {
					s[i] += lp[k]
				}
			}
		}
		return s[0], s[1]
	}
	good0, bad0 := seqLogProb()
	if _, err := tr.updateActor(b); err != nil {
		t.Fatal(err)
	}
	good1, bad1 := seqLogProb()
	t.Logf("positive-advantage sequence %.4f -> %.4f, negative %.4f -> %.4f", good0, good1, bad0, bad1)
	if !(good1 > good0) || !(bad1 < bad0) {
		t.Fatalf("update went the wrong way: positive %.4f -> %.4f, negative %.4f -> %.4f", good0, good1, bad0, bad1)
	}
}
