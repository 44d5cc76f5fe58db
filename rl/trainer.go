package rl

import (
	"context"
	"fmt"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// AlgorithmConfig selects the estimator and how rewards are shaped
// (verl's algorithm.* keys, Agent-R1's masks).
type AlgorithmConfig struct {
	AdvEstimator  string  `yaml:"adv_estimator" help:"gae (PPO with a critic), grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline, or a registered estimator"`
	Gamma         float64 `yaml:"gamma" help:"discount"`
	Lambda        float64 `yaml:"lam" help:"GAE lambda"`
	NormAdvByStd  bool    `yaml:"norm_adv_by_std_in_grpo" help:"GRPO divides by the group std (false: Dr.GRPO)"`
	AdvantageMask bool    `yaml:"advantage_mask" help:"credit only the model's own tokens (false: the paper's ablation)"`
	UseKLInReward bool    `yaml:"use_kl_in_reward" help:"subtract beta*KL(old||ref) from the token rewards"`
	KLPenalty     string  `yaml:"kl_penalty" help:"KL estimator for the in-reward penalty"`
	KLCtrl        string  `yaml:"kl_ctrl" help:"fixed or adaptive"`
	KLCoef        float64 `yaml:"kl_coef" help:"initial beta of the in-reward KL"`
	KLTarget      float64 `yaml:"kl_target" help:"adaptive controller target KL"`
	KLHorizon     float64 `yaml:"kl_horizon" help:"adaptive controller horizon"`
	ProcessReward bool    `yaml:"use_process_rewards" help:"add the environment's per-tool-call rewards"`
	PrimeNorm     bool    `yaml:"prime_norm" help:"PRIME-style normalisation of process rewards"`
}

// ActorConfig configures the policy update (verl's actor.* keys).
type ActorConfig struct {
	Optim            optim.Config `yaml:"optim"`
	PPOEpochs        int          `yaml:"ppo_epochs" help:"passes over each step's batch"`
	MiniBatchSize    int          `yaml:"ppo_mini_batch_size" help:"trajectories per optimizer step"`
	MicroBatchTokens int          `yaml:"micro_batch_tokens" help:"tokens per forward/backward (gradient accumulation)"`
	PolicyLoss       string       `yaml:"policy_loss" help:"vanilla (PPO), gspo, or a registered loss"`
	ClipRatio        float64      `yaml:"clip_ratio" help:"PPO clip epsilon"`
	ClipRatioLow     float64      `yaml:"clip_ratio_low" help:"lower clip (0: clip_ratio)"`
	ClipRatioHigh    float64      `yaml:"clip_ratio_high" help:"upper clip (0: clip_ratio; raise for DAPO clip-higher)"`
	ClipRatioC       float64      `yaml:"clip_ratio_c" help:"dual-clip bound for negative advantages"`
	LossAggMode      string       `yaml:"loss_agg_mode" help:"token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm"`
	EntropyCoeff     float64      `yaml:"entropy_coeff" help:"entropy bonus"`
	UseKLLoss        bool         `yaml:"use_kl_loss" help:"add KL(pi||ref) to the loss (GRPO style)"`
	KLLossCoef       float64      `yaml:"kl_loss_coef" help:"weight of the KL loss"`
	KLLossType       string       `yaml:"kl_loss_type" help:"k1, abs, k2, low_var_kl (k3), or a + straight-through variant"`
}

// CriticConfig configures the value model of PPO (verl's critic.* keys).
type CriticConfig struct {
	Optim          optim.Config `yaml:"optim"`
	Warmup         int          `yaml:"critic_warmup" help:"steps that update only the critic"`
	CliprangeValue float64      `yaml:"cliprange_value" help:"value clip epsilon"`
}

// TrainerConfig is everything one RL step needs.
type TrainerConfig struct {
	Algorithm AlgorithmConfig `yaml:"algorithm"`
	Actor     ActorConfig     `yaml:"actor"`
	Critic    CriticConfig    `yaml:"critic"`
	Rollout   RolloutConfig   `yaml:"rollout"`
}

// DefaultTrainerConfig is GRPO with Agent-R1's multi-hop script settings.
func DefaultTrainerConfig() TrainerConfig {
	a := optim.DefaultConfig()
	c := optim.DefaultConfig()
	c.LR = 1e-5
	return TrainerConfig{
		Algorithm: AlgorithmConfig{AdvEstimator: "grpo", Gamma: 1, Lambda: 1, NormAdvByStd: true, AdvantageMask: true,
			KLPenalty: "kl", KLCtrl: "fixed", KLCoef: 0.001, KLTarget: 0.1, KLHorizon: 10000},
		Actor: ActorConfig{Optim: a, PPOEpochs: 1, MiniBatchSize: 64, MicroBatchTokens: 8192, PolicyLoss: "vanilla",
			ClipRatio: 0.2, ClipRatioC: 3, LossAggMode: string(TokenMean), UseKLLoss: true, KLLossCoef: 0.001, KLLossType: "low_var_kl"},
		Critic:  CriticConfig{Optim: c, CliprangeValue: 0.5},
		Rollout: DefaultRolloutConfig(),
	}
}

// Validate reports a setting that cannot work, before any work starts.
func (c *TrainerConfig) Validate() error {
	if _, err := LookupEstimator(c.Algorithm.AdvEstimator); err != nil {
		return err
	}
	if _, err := LookupLoss(c.Actor.PolicyLoss); err != nil {
		return err
	}
	if _, err := ParseAggMode(c.Actor.LossAggMode); err != nil {
		return err
	}
	if _, err := ParseKL(c.Actor.KLLossType); err != nil {
		return err
	}
	if _, err := ParseKL(c.Algorithm.KLPenalty); err != nil {
		return err
	}
	if c.Algorithm.KLCtrl != "fixed" && c.Algorithm.KLCtrl != "adaptive" {
		return fmt.Errorf("rl: kl_ctrl %q is neither fixed nor adaptive", c.Algorithm.KLCtrl)
	}
	if c.Actor.PPOEpochs < 1 || c.Actor.MiniBatchSize < 1 || c.Actor.MicroBatchTokens < 1 {
		return fmt.Errorf("rl: ppo_epochs %d, ppo_mini_batch_size %d and micro_batch_tokens %d must be ≥ 1",
			c.Actor.PPOEpochs, c.Actor.MiniBatchSize, c.Actor.MicroBatchTokens)
	}
	if err := c.Actor.Optim.Validate(); err != nil {
		return err
	}
	if err := c.Critic.Optim.Validate(); err != nil {
		return err
	}
	return c.Rollout.Validate()
}

func (c *TrainerConfig) lossConfig() LossConfig {
	a := c.Actor
	return LossConfig{PolicyLoss: a.PolicyLoss, ClipRatio: a.ClipRatio, ClipRatioLow: a.ClipRatioLow, ClipRatioHigh: a.ClipRatioHigh,
		ClipRatioC: a.ClipRatioC, AggMode: AggMode(a.LossAggMode), EntropyCoeff: a.EntropyCoeff, UseKLLoss: a.UseKLLoss,
		KLLossCoef: a.KLLossCoef, KLLossType: a.KLLossType, CliprangeValue: c.Critic.CliprangeValue}
}

// Trainer runs RL steps: the policy samples trajectories with the rollout,
// and the same weights are updated in place, so the next rollout samples
// from the updated policy with no copy.
type Trainer struct {
	Cfg       TrainerConfig
	Policy    *model.Model
	Ref       *model.Model // frozen reference policy; nil when no KL is used
	Critic    *model.Model // value model; only for gae
	Rollout   *Rollout
	ActorOpt  *optim.AdamW
	CriticOpt *optim.AdamW
	KLCtrl    KLController

	ToolCallEnd int32 // token that ends a tool call (process rewards)
	step        int   // RL steps done
}

// NeedsRef says whether the configuration uses a reference policy.
func (c *TrainerConfig) NeedsRef() bool { return c.Actor.UseKLLoss || c.Algorithm.UseKLInReward }

// NeedsCritic says whether the estimator needs a value model.
func (c *TrainerConfig) NeedsCritic() bool { return c.Algorithm.AdvEstimator == "gae" }

// NewKLController builds the in-reward KL controller of the config.
func (c *TrainerConfig) NewKLController() KLController {
	if c.Algorithm.KLCtrl == "adaptive" {
		return &AdaptiveKL{Coef: c.Algorithm.KLCoef, Target: c.Algorithm.KLTarget, Horizon: c.Algorithm.KLHorizon}
	}
	return &FixedKL{Coef: c.Algorithm.KLCoef}
}

// Steps is the number of RL steps done.
func (t *Trainer) Steps() int { return t.step }

// SetSteps restores the step count on resume.
func (t *Trainer) SetSteps(n int) { t.step = n }

// StepResult is one RL step's trajectories and metrics.
type StepResult struct {
	Trajectories []*Trajectory
	Metrics      Metrics
	Tokens       int    // prompt + response tokens of the step
	Batch        *Batch // the packed step, advantages included (for the rollout dump)
}

// Step runs one RL step on a batch of prompts: rollout, rewards, old and
// reference log-probabilities, values, advantages, then the critic and
// actor updates.
func (t *Trainer) Step(ctx context.Context, prompts []data.Sample) (*StepResult, error) {
	cfg := &t.Cfg
	m := Metrics{}
	timed := func(name string, start time.Time) { m["timing_s/"+name] = time.Since(start).Seconds() }
	t0 := time.Now()

	tg := time.Now()
	trajs, err := t.Rollout.Run(ctx, prompts)
	if err != nil {
		return nil, err
	}
	timed("gen", tg)
	b := FromTrajectories(trajs, cfg.Algorithm.AdvantageMask)
	scores := make([]float64, len(trajs))
	for i, tr := range trajs {
		scores[i] = tr.Scores.Score
	}
	if err := AddOutcome(b, scores); err != nil {
		return nil, err
	}
	if cfg.Algorithm.ProcessReward {
		rs := make([][]float64, len(trajs))
		for i, tr := range trajs {
			rs[i] = tr.ProcessRewards
		}
		if err := AddProcessRewards(b, t.ToolCallEnd, rs, cfg.Algorithm.PrimeNorm); err != nil {
			return nil, err
		}
	}

	// With one epoch of one mini-batch the policy has not moved when the
	// loss is computed, so π_old is the update's own forward (verl sets
	// old_log_prob = log_prob.detach() there too): the ratio is exactly 1
	// and one forward pass is saved. Otherwise π_old is recomputed here.
	if !t.reuseOld(b) {
		tl := time.Now()
		if b.OldLogProb, _, _, err = Score(t.Policy, b, cfg.Actor.MicroBatchTokens); err != nil {
			return nil, err
		}
		timed("old_log_prob", tl)
	}
	if cfg.NeedsRef() {
		tr := time.Now()
		if b.RefLogProb, _, _, err = Score(t.Ref, b, cfg.Actor.MicroBatchTokens); err != nil {
			return nil, err
		}
		timed("ref", tr)
	}
	if cfg.NeedsCritic() {
		tv := time.Now()
		if _, _, b.OldValues, err = Score(t.Critic, b, cfg.Actor.MicroBatchTokens); err != nil {
			return nil, err
		}
		timed("values", tv)
	}

	ta := time.Now()
	if cfg.Algorithm.UseKLInReward {
		kind, err := ParseKL(cfg.Algorithm.KLPenalty)
		if err != nil {
			return nil, err
		}
		km, err := ApplyKLPenalty(b, kind, t.KLCtrl)
		if err != nil {
			return nil, err
		}
		for k, v := range km {
			m[k] = v
		}
	} else if err := b.RewardsFromScores(); err != nil {
		return nil, err
	}
	adv := AdvantageConfig{Estimator: cfg.Algorithm.AdvEstimator, Gamma: cfg.Algorithm.Gamma, Lambda: cfg.Algorithm.Lambda, NormAdvByStd: cfg.Algorithm.NormAdvByStd}
	if err := Estimate(b, &adv); err != nil {
		return nil, err
	}
	dm, err := DataMetrics(b)
	if err != nil {
		return nil, err
	}
	for k, v := range dm {
		m[k] = v
	}
	timed("adv", ta)

	if cfg.NeedsCritic() {
		tc := time.Now()
		cm, err := t.update(b, t.Critic, t.CriticOpt, "critic")
		if err != nil {
			return nil, err
		}
		for k, v := range cm {
			m[k] = v
		}
		timed("update_critic", tc)
	}
	if !cfg.NeedsCritic() || t.step >= cfg.Critic.Warmup {
		tu := time.Now()
		am, err := t.update(b, t.Policy, t.ActorOpt, "actor")
		if err != nil {
			return nil, err
		}
		for k, v := range am {
			m[k] = v
		}
		timed("update_actor", tu)
	}
	t.step++
	for k, v := range RolloutMetrics(trajs) {
		m[k] = v
	}
	timed("step", t0)
	m["perf/total_num_tokens"] = float64(b.NumTokens())
	m["perf/throughput"] = float64(b.NumTokens()) / m["timing_s/step"]
	m["training/global_step"] = float64(t.step)
	return &StepResult{Trajectories: trajs, Metrics: m, Tokens: b.NumTokens(), Batch: b}, nil
}

// reuseOld says whether π_old is taken from the update's forward.
func (t *Trainer) reuseOld(b *Batch) bool {
	c := &t.Cfg
	return c.Actor.PPOEpochs == 1 && c.Actor.MiniBatchSize >= b.NumSeqs() && !c.Algorithm.UseKLInReward
}

// sumMetrics are the loss-valued metrics whose micro-batch values add up to
// the mini-batch's; the rest are averaged.
var sumMetrics = map[string]bool{"actor/pg_loss": true, "actor/entropy": true, "actor/kl_loss": true, "critic/vf_loss": true}

// update runs ppo_epochs passes of mini-batch updates of the actor or the
// critic, with gradient accumulation over micro-batches.
func (t *Trainer) update(b *Batch, mdl *model.Model, opt *optim.AdamW, role string) (Metrics, error) {
	cfg := &t.Cfg
	lc := cfg.lossConfig()
	var all []Metrics
	order := make([]int, b.NumSeqs())
	for i := range order {
		order[i] = i
	}
	for epoch := 0; epoch < cfg.Actor.PPOEpochs; epoch++ {
		for lo := 0; lo < b.NumSeqs(); lo += cfg.Actor.MiniBatchSize {
			hi := min(lo+cfg.Actor.MiniBatchSize, b.NumSeqs())
			mini := b.Slice(lo, hi)
			norm, err := NewNorm(lc.AggMode, mini, lc.LossScaleFactor)
			if err != nil {
				return nil, err
			}
			mdl.ZeroGrads()
			mm := Metrics{}
			cuts := MicroBatches(mini, cfg.Actor.MicroBatchTokens)
			var out Output
			for j := 0; j+1 < len(cuts); j++ {
				mb := mini.Slice(cuts[j], cuts[j+1])
				res, err := mdl.Forward(modelBatch(mb), true)
				if err != nil {
					return nil, err
				}
				switch role {
				case "actor":
					mb.LogProb = shiftIn(mb, nil, res.LogProb)
					mb.Entropy = shiftIn(mb, nil, res.Entropy)
					if b.OldLogProb == nil {
						mb.OldLogProb = mb.LogProb
					}
					if err := ActorLoss(mb, &lc, norm, &out); err != nil {
						return nil, err
					}
					err = mdl.Backward(shiftOut(mb, out.DLogProb), shiftOut(mb, out.DEntropy), nil)
				case "critic":
					mb.Values = shiftIn(mb, nil, res.Values)
					if err := CriticLoss(mb, &lc, norm, &out); err != nil {
						return nil, err
					}
					err = mdl.Backward(nil, nil, shiftOut(mb, out.DValue))
				}
				if err != nil {
					return nil, err
				}
				for k, v := range out.Metrics {
					if sumMetrics[k] {
						mm[k] += v
					} else {
						mm[k] += v / float64(len(cuts)-1)
					}
				}
			}
			r := opt.Step(1)
			mm[role+"/grad_norm"] = r.GradNorm
			mm[role+"/lr"] = r.LR
			if r.Skipped {
				mm[role+"/skipped_steps"] = 1
			}
			all = append(all, mm)
		}
	}
	return MeanMetrics(all), nil
}

// RolloutMetrics summarises trajectories under verl's names plus the QA
// metrics: num_turns/*, tool_call_counts/*, env/em, env/f1, env/cover_em,
// env/format, and the share of each finish reason.
func RolloutMetrics(trajs []*Trajectory) Metrics {
	m := Metrics{}
	turns, calls := make([]float64, len(trajs)), make([]float64, len(trajs))
	var em, f1, cover, format float64
	finish := map[Finish]float64{}
	for i, t := range trajs {
		turns[i], calls[i] = float64(t.Turns), float64(t.ToolCalls)
		em += t.Scores.EM
		f1 += t.Scores.F1
		cover += t.Scores.CoverEM
		format += t.Scores.Format
		finish[t.Finish]++
	}
	n := float64(max(len(trajs), 1))
	m.putStats("num_turns", turns, nil)
	m.putStats("tool_call_counts", calls, nil)
	m["env/em"], m["env/f1"], m["env/cover_em"], m["env/format"] = em/n, f1/n, cover/n, format/n
	for _, f := range []Finish{FinishAnswer, FinishMaxTurns, FinishLength, FinishTurnLimit} {
		m["env/finish_"+string(f)] = finish[f] / n
	}
	return m
}
