package rl

import (
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/optim"
)

// TestUpdateDirection checks the sign chain from advantages to weights:
// after one GRPO actor update, the sequence with the positive advantage is
// more likely under the policy and the one with the negative advantage less.
func TestUpdateDirection(t *testing.T) {
	m := tinyModel(t, model.LMHeadOutput)
	b := twoSequences()
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

// tinyModel is a random two-layer Qwen2 of vocabulary 23 on the CPU.
func tinyModel(t *testing.T, head model.Head) *model.Model {
	t.Helper()
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 16,
		"intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": 23, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.2,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "test config")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, cpu.New(), head)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(3)
	return m
}

// twoSequences is a batch of two trajectories of one prompt, each with
// three action tokens around one forced token.
func twoSequences() *Batch {
	trajs := []*Trajectory{
		{Tokens: []int32{1, 2, 3, 4, 5, 6, 7}, PromptLen: 3, Action: []bool{false, false, false, true, true, false, true}, LogProb: make([]float32, 7)},
		{Tokens: []int32{1, 2, 3, 8, 9, 10, 11}, PromptLen: 3, Action: []bool{false, false, false, true, true, false, true}, LogProb: make([]float32, 7)},
	}
	return FromTrajectories(trajs, true)
}

// TestCriticUpdatesOnItsOwnSettings runs the critic's update with epochs
// and a mini-batch size unlike the actor's: it takes one optimizer step per
// mini-batch of each of its own epochs.
func TestCriticUpdatesOnItsOwnSettings(t *testing.T) {
	critic := tinyModel(t, model.ValueHeadOutput)
	b := twoSequences()
	if err := AddOutcome(b, []float64{1, 0}); err != nil {
		t.Fatal(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		t.Fatal(err)
	}
	var err error
	if _, _, b.OldValues, err = Forward(critic, b, 1024); err != nil {
		t.Fatal(err)
	}
	c := DefaultTrainerConfig()
	c.Actor.PPOEpochs, c.Actor.MiniBatchSize = 1, 64
	c.Critic.PPOEpochs, c.Critic.MiniBatchSize, c.Critic.MicroBatchTokens = 3, 1, 7
	adv := AdvantageConfig{Estimator: "gae", Gamma: 1, Lambda: 1}
	if err := Estimate(b, &adv); err != nil {
		t.Fatal(err)
	}
	opt, err := optim.New(critic.Dev, critic.Params, critic.Grads, c.Critic.Optim, 6)
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trainer{Cfg: c, Critic: critic, CriticOpt: opt}
	if _, err := tr.updateCritic(b); err != nil {
		t.Fatal(err)
	}
	if got := opt.Steps(); got != 6 {
		t.Errorf("the critic took %d optimizer steps, want 6 (3 epochs of 2 mini-batches of 1)", got)
	}
}

// TestEachScheduleHasItsLength builds a PPO trainer whose critic updates
// in more mini-batches than its actor: each optimizer's learning-rate
// schedule spans the optimizer steps its own model takes over the run, so
// a cosine schedule reaches its floor at the last step, not before.
func TestEachScheduleHasItsLength(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "policy")
	if err := tinyModel(t, model.LMHeadOutput).Save(dir, nil, model.SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	policy, err := model.Load(dir, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultTrainerConfig()
	c.Algorithm.Estimator = "gae"
	c.Actor.UseKLLoss = false
	c.Rollout.N = 4
	c.Actor.PPOEpochs, c.Actor.MiniBatchSize = 1, 8
	c.Critic.PPOEpochs, c.Critic.MiniBatchSize = 2, 2
	c.Actor.Optim.Schedule, c.Critic.Optim.Schedule = "cosine", "cosine"
	tr, err := NewTrainer(c, Setup{Policy: policy, RefDir: dir, Slots: 4, MaxContext: 32, TotalSteps: 10, PromptsPerStep: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 2 prompts × 4 samples = 8 trajectories a step.
	if got, want := tr.ActorOpt.TotalSteps, 10*1*1; got != want {
		t.Errorf("actor schedule of %d steps, want %d", got, want)
	}
	if got, want := tr.CriticOpt.TotalSteps, 10*2*4; got != want {
		t.Errorf("critic schedule of %d steps, want %d", got, want)
	}
}

// TestNeedsComeFromTheRegistry registers an estimator that needs values:
// the trainer then loads a critic for it, as for gae, without knowing its
// name. ReMax needs a baseline, which an external rollout cannot make.
func TestNeedsComeFromTheRegistry(t *testing.T) {
	RegisterEstimator("test-needs-values", GAE, Needs{Values: true})
	c := DefaultTrainerConfig()
	for est, want := range map[string]bool{"test-needs-values": true, "gae": true, "grpo": false, "remax": false} {
		c.Algorithm.Estimator = est
		if got := c.NeedsCritic(); got != want {
			t.Errorf("%s: NeedsCritic %v, want %v", est, got, want)
		}
	}
	c.Algorithm.Estimator = "remax"
	if !c.Needs().Baseline {
		t.Error("remax does not declare its baseline")
	}
	if err := c.Validate(); err != nil {
		t.Errorf("remax with the builtin rollout: %v", err)
	}
	c.Rollout.Mode = "external"
	if err := c.Validate(); err == nil {
		t.Error("remax with rollout.mode external passed Validate")
	}
}

// TestLossMaskAblation: with algorithm.loss_mask false (and the advantage
// mask off, the paper's ablation order) the forced token of the
// positive-advantage sequence is trained and gains probability; with the
// loss mask on it is not trained and gains less. The batch's action mask
// is the sampler's again after the update.
func TestLossMaskAblation(t *testing.T) {
	forced := func(lossMask bool) float64 {
		m := tinyModel(t, model.LMHeadOutput)
		b := twoSequences()
		resp, err := b.ResponseMask()
		if err != nil {
			t.Fatal(err)
		}
		b.AdvantageMask = resp
		if err := AddOutcome(b, []float64{1, 0}); err != nil {
			t.Fatal(err)
		}
		if err := b.RewardsFromScores(); err != nil {
			t.Fatal(err)
		}
		c := DefaultTrainerConfig()
		c.Actor.UseKLLoss, c.Algorithm.LossMask = false, lossMask
		c.Actor.Optim.LR, c.Actor.Optim.WeightDecay = 1e-2, 0
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		adv := AdvantageConfig{Estimator: "grpo", Gamma: 1, Lambda: 1, NormAdvByStd: true}
		if err := Estimate(b, &adv); err != nil {
			t.Fatal(err)
		}
		opt, err := optim.New(m.Dev, m.Params, m.Grads, c.Actor.Optim, 1)
		if err != nil {
			t.Fatal(err)
		}
		tr := &Trainer{Cfg: c, Policy: m, ActorOpt: opt}
		const k = 5 // sequence 0's forced token
		lp0, _, _, err := Forward(m, b, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.updateModels(b, stepClock{t: tr, m: Metrics{}}); err != nil {
			t.Fatal(err)
		}
		lp1, _, _, err := Forward(m, b, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if b.ActionMask[k] {
			t.Errorf("loss_mask %v: the batch's action mask is not the sampler's after the update", lossMask)
		}
		return lp1[k] - lp0[k]
	}
	on, off := forced(true), forced(false)
	t.Logf("forced token's log-prob change: loss mask on %.4f, off %.4f", on, off)
	if !(off > 0) || !(off > on) {
		t.Errorf("loss mask off: the forced token's log-prob moved %.4f (on: %.4f), want a gain larger than with the mask", off, on)
	}
	c := DefaultTrainerConfig()
	c.Algorithm.LossMask, c.Algorithm.RolloutCorrection.BypassMode = false, true
	if err := c.Validate(); err == nil {
		t.Error("loss_mask false with bypass mode passed Validate")
	}
	c = DefaultTrainerConfig()
	c.Algorithm.LossMask, c.Rollout.TruncationLoss = false, TruncationMask
	if err := c.Validate(); err == nil {
		t.Error("loss_mask false with truncation_loss mask passed Validate")
	}
}
