package rl

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// AlgorithmConfig selects the estimator and how rewards are shaped
// (verl's algorithm.* keys, Agent-R1's masks). The estimator's own settings
// are the embedded AdvantageConfig, read by the estimator as they are.
type AlgorithmConfig struct {
	AdvantageConfig `yaml:",inline"`
	AdvantageMask   bool    `yaml:"advantage_mask" help:"credit only the model's own tokens (false: the paper's ablation)"`
	UseKLInReward   bool    `yaml:"use_kl_in_reward" help:"subtract beta*KL(old||ref) from the token rewards"`
	KLPenalty       string  `yaml:"kl_penalty" help:"KL estimator for the in-reward penalty"`
	KLCtrl          string  `yaml:"kl_ctrl" help:"fixed or adaptive"`
	KLCoef          float64 `yaml:"kl_coef" help:"initial beta of the in-reward KL"`
	KLTarget        float64 `yaml:"kl_target" help:"adaptive controller target KL"`
	KLHorizon       float64 `yaml:"kl_horizon" help:"adaptive controller horizon"`
	ProcessReward   bool    `yaml:"use_process_rewards" help:"add the environment's per-tool-call rewards"`
	PrimeNorm       bool    `yaml:"prime_norm" help:"PRIME-style normalisation of process rewards"`
}

// Validate reports an unknown KL estimator or controller. (The embedded
// AdvantageConfig is checked by its own Validate.)
func (c *AlgorithmConfig) Validate() error {
	if err := c.AdvantageConfig.Validate(); err != nil {
		return err
	}
	if _, err := ParseKL(c.KLPenalty); err != nil {
		return fmt.Errorf("kl_penalty: %w", err)
	}
	if c.KLCtrl != "fixed" && c.KLCtrl != "adaptive" {
		return fmt.Errorf("kl_ctrl %q is neither fixed nor adaptive", c.KLCtrl)
	}
	if !(c.KLCoef >= 0) || math.IsInf(c.KLCoef, 0) {
		return fmt.Errorf("kl_coef %v must be a finite number ≥ 0", c.KLCoef)
	}
	return nil
}

// UpdateConfig shapes one model's update (verl's ppo_epochs,
// ppo_mini_batch_size and the micro-batch): the actor and the critic each
// embed their own, so the critic never runs on the actor's settings.
type UpdateConfig struct {
	PPOEpochs        int `yaml:"ppo_epochs" help:"passes over each step's batch"`
	MiniBatchSize    int `yaml:"ppo_mini_batch_size" help:"trajectories per optimizer step"`
	MicroBatchTokens int `yaml:"micro_batch_tokens" help:"tokens per forward/backward (gradient accumulation)"`
}

// Validate reports sizes below 1.
func (c *UpdateConfig) Validate() error {
	if c.PPOEpochs < 1 || c.MiniBatchSize < 1 || c.MicroBatchTokens < 1 {
		return fmt.Errorf("ppo_epochs %d, ppo_mini_batch_size %d and micro_batch_tokens %d must be ≥ 1",
			c.PPOEpochs, c.MiniBatchSize, c.MicroBatchTokens)
	}
	return nil
}

// OptimizerSteps is how many optimizer steps the update takes over a run of
// steps RL steps of seqs trajectories each: one per mini-batch of each
// epoch. It is the length of the model's learning-rate schedule.
func (c *UpdateConfig) OptimizerSteps(steps, seqs int) int {
	return steps * c.PPOEpochs * ((seqs + c.MiniBatchSize - 1) / c.MiniBatchSize)
}

// ActorConfig configures the policy update (verl's actor.* keys). The
// loss's own settings are the embedded LossConfig, which ActorLoss reads as
// it is: actor.clip_ratio goes from the YAML file to the loss through this
// struct and nothing else.
type ActorConfig struct {
	Optim        optim.Config `yaml:"optim"`
	UpdateConfig `yaml:",inline"`
	LossConfig   `yaml:",inline"`

	// LoRA adapters instead of full fine-tuning (wired in cmd/train/lora.go).
	LoRA model.LoRAConfig `yaml:"lora"`
}

// Validate reports sizes below 1 and a bad loss setting.
func (c *ActorConfig) Validate() error {
	if err := c.UpdateConfig.Validate(); err != nil {
		return err
	}
	return c.LossConfig.Validate()
}

// CriticConfig configures the value model of PPO (verl's critic.* keys):
// its optimizer, its own update shape and aggregation, and the value clip.
type CriticConfig struct {
	Optim           optim.Config `yaml:"optim"`
	UpdateConfig    `yaml:",inline"`
	AggMode         AggMode `yaml:"loss_agg_mode" help:"token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm"`
	LossScaleFactor float64 `yaml:"loss_scale_factor" help:"L_norm of seq-mean-token-sum-norm (0: the longest sequence)"`
	Warmup          int     `yaml:"critic_warmup" help:"steps that update only the critic"`
	CliprangeValue  float64 `yaml:"cliprange_value" help:"value clip epsilon"`
}

// Validate reports a bad update shape, a negative warm-up or value clip.
func (c *CriticConfig) Validate() error {
	if err := c.UpdateConfig.Validate(); err != nil {
		return err
	}
	if _, err := ParseAggMode(string(c.AggMode)); err != nil {
		return fmt.Errorf("loss_agg_mode: %w", err)
	}
	if !(c.LossScaleFactor >= 0) || math.IsInf(c.LossScaleFactor, 0) {
		return fmt.Errorf("loss_scale_factor %v must be a finite number ≥ 0", c.LossScaleFactor)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("critic_warmup %d must be ≥ 0", c.Warmup)
	}
	if !(c.CliprangeValue >= 0) || math.IsInf(c.CliprangeValue, 0) {
		return fmt.Errorf("cliprange_value %v must be a finite number ≥ 0", c.CliprangeValue)
	}
	return nil
}

// TrainerConfig is everything one RL step needs.
type TrainerConfig struct {
	Algorithm AlgorithmConfig `yaml:"algorithm"`
	Actor     ActorConfig     `yaml:"actor"`
	Critic    CriticConfig    `yaml:"critic"`
	Rollout   RolloutConfig   `yaml:"rollout"`
}

// DefaultTrainerConfig is GRPO with Agent-R1's multi-hop script settings;
// each part's defaults are its own (DefaultLossConfig, DefaultRolloutConfig,
// optim.DefaultConfig), with Agent-R1's departures from them written here.
func DefaultTrainerConfig() TrainerConfig {
	a := optim.DefaultConfig()
	c := optim.DefaultConfig()
	c.LR = 1e-5
	adv := DefaultAdvantageConfig()
	adv.Estimator = "grpo"
	loss := DefaultLossConfig()
	loss.UseKLLoss = true // GRPO's KL loss
	// The critic's update starts as the actor's, as verl's critic.* keys
	// default to the actor's; each is then set on its own.
	u := UpdateConfig{PPOEpochs: 1, MiniBatchSize: 64, MicroBatchTokens: 8192}
	return TrainerConfig{
		Algorithm: AlgorithmConfig{AdvantageConfig: adv, AdvantageMask: true,
			KLPenalty: "kl", KLCtrl: "fixed", KLCoef: 0.001, KLTarget: 0.1, KLHorizon: 10000},
		Actor:   ActorConfig{Optim: a, UpdateConfig: u, LossConfig: loss},
		Critic:  CriticConfig{Optim: c, UpdateConfig: u, AggMode: loss.AggMode, CliprangeValue: 0.5},
		Rollout: DefaultRolloutConfig(),
	}
}

// Validate reports a setting that cannot work, before any work starts. The
// config loader calls each section's Validate with the section's key; this
// one runs them all for a caller that builds the config in Go, naming the
// section.
func (c *TrainerConfig) Validate() error {
	for _, s := range []struct {
		key string
		v   interface{ Validate() error }
	}{{"algorithm", &c.Algorithm}, {"actor", &c.Actor}, {"actor.optim", &c.Actor.Optim}, {"critic", &c.Critic},
		{"critic.optim", &c.Critic.Optim}, {"rollout", &c.Rollout}} {
		if err := s.v.Validate(); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	if c.Needs().Baseline && c.Rollout.Mode == "external" {
		return fmt.Errorf("algorithm.adv_estimator %s needs a greedy rollout of each prompt, which rollout.mode external cannot make", c.Algorithm.Estimator)
	}
	return nil
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
	Source    TrajectorySource // when set, trajectories come from here instead of Rollout (rollout.mode=external)
	ActorOpt  *optim.AdamW
	CriticOpt *optim.AdamW
	KLCtrl    KLController

	ToolCallEnd int32 // token that ends a tool call (process rewards)
	// Sync is the data-parallel part (Local in a run of one process); the
	// trainer always goes through it.
	Sync Sync
	// Phase, when set, is told each phase of a step as it ends (the names
	// of the timing_s metrics: gen, gen_baseline, old_log_prob, ref, values,
	// adv, update_critic, update_actor), so that a caller can show progress
	// inside a step that takes minutes.
	Phase func(name string, took time.Duration)
	step  int   // RL steps done
	slice Slice // this process's share of the step's batch (Sync.Shard)
	// rolloutCopy is the bf16 copy the rollout samples from
	// (rollout.dtype bfloat16), or nil.
	rolloutCopy *model.Model
}

// NeedsRef says whether the configuration uses a reference policy.
func (c *TrainerConfig) NeedsRef() bool { return c.Actor.UseKLLoss || c.Algorithm.UseKLInReward }

// Needs is what the estimator needs from the trainer (the registry's
// word; nothing for a name the registry does not know, which Validate reports).
func (c *TrainerConfig) Needs() Needs {
	n, _ := EstimatorNeeds(c.Algorithm.Estimator)
	return n
}

// NeedsCritic says whether the estimator needs a value model.
func (c *TrainerConfig) NeedsCritic() bool { return c.Needs().Values }

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
	timed := func(name string, start time.Time) {
		took := time.Since(start)
		m["timing_s/"+name] = took.Seconds()
		if t.Phase != nil && name != "step" {
			t.Phase(name, took)
		}
	}
	t0 := time.Now()

	// This process rolls out its share of the global prompt batch; its
	// first trajectory draws from the stream the whole batch's would.
	t.slice = t.sync().Shard(prompts, cfg.Rollout.N)
	prompts = prompts[t.slice.PromptLo:t.slice.PromptHi]
	if t.Rollout != nil {
		t.Rollout.StreamBase = uint64(t.slice.SeqLo)
	}
	tg := time.Now()
	var src TrajectorySource = t.Rollout
	if t.Source != nil {
		src = t.Source
	}
	if t.rolloutCopy != nil && src == TrajectorySource(t.Rollout) {
		if err := t.rolloutCopy.CopyWeightsFrom(t.Policy); err != nil {
			return nil, err
		}
	}
	trajs, err := src.Run(ctx, t.step, prompts)
	if err == nil {
		timed("gen", tg)
	}
	var baseline []float64
	if err == nil && cfg.Needs().Baseline {
		tb := time.Now()
		baseline, err = t.baselines(ctx, prompts, trajs)
		timed("gen_baseline", tb)
	}
	if t.rolloutCopy != nil {
		t.rolloutCopy.DiscardWeights() // rewritten before the next rollout
	}
	if err != nil {
		return nil, err
	}
	b := FromTrajectories(trajs, cfg.Algorithm.AdvantageMask)
	b.BaselineScore = baseline
	scores := make([]float64, len(trajs))
	for i, tr := range trajs {
		scores[i] = tr.Outcome.Reward
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
		if b.OldLogProb, _, _, err = Forward(t.Policy, b, cfg.Actor.MicroBatchTokens); err != nil {
			return nil, err
		}
		timed("old_log_prob", tl)
	}
	if cfg.NeedsRef() {
		tr := time.Now()
		if b.RefLogProb, _, _, err = Forward(t.Ref, b, cfg.Actor.MicroBatchTokens); err != nil {
			return nil, err
		}
		t.Ref.DropWeightPages() // offloaded (Setup.RefOffloadDir): out of memory until the next step's scoring
		timed("ref", tr)
	}
	if cfg.NeedsCritic() {
		tv := time.Now()
		if _, _, b.OldValues, err = Forward(t.Critic, b, cfg.Critic.MicroBatchTokens); err != nil {
			return nil, err
		}
		timed("values", tv)
	}

	ta := time.Now()
	// Rewards, advantages and data metrics over the global batch.
	if b, err = t.sync().GatherBatch(b, t.slice); err != nil {
		return nil, err
	}
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
	if err := Estimate(b, &cfg.Algorithm.AdvantageConfig); err != nil {
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
		cm, err := t.updateCritic(b)
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
		am, err := t.updateActor(b)
		if err != nil {
			return nil, err
		}
		for k, v := range am {
			m[k] = v
		}
		timed("update_actor", tu)
	}
	t.step++
	rm, err := t.sync().RolloutMetrics(trajs) // over every process's trajectories
	if err != nil {
		return nil, err
	}
	for k, v := range rm {
		m[k] = v
	}
	timed("step", t0)
	m["perf/total_num_tokens"] = float64(b.NumTokens())
	m["perf/throughput"] = float64(b.NumTokens()) / m["timing_s/step"]
	m["training/global_step"] = float64(t.step)
	return &StepResult{Trajectories: trajs, Metrics: m, Tokens: b.NumTokens(), Batch: b}, nil
}

// baselines rolls every prompt out once more, greedily, from the weights
// that sampled trajs, and returns each trajectory's baseline: the score of
// its prompt's greedy response (ReMax's baseline, as verl's trainer makes
// it).
func (t *Trainer) baselines(ctx context.Context, prompts []data.Sample, trajs []*Trajectory) ([]float64, error) {
	cfg := t.Cfg.Rollout
	cfg.N, cfg.Sampling = 1, model.Greedy
	r := *t.Rollout
	r.Cfg = &cfg
	greedy, err := r.Run(ctx, t.step, prompts)
	if err != nil {
		return nil, fmt.Errorf("rl: the greedy baseline rollout: %w", err)
	}
	out := make([]float64, len(trajs))
	for i, tr := range trajs {
		out[i] = greedy[tr.Group].Outcome.Reward
	}
	return out, nil
}

// reuseOld says whether π_old is taken from the update's forward.
func (t *Trainer) reuseOld(b *Batch) bool {
	c := &t.Cfg
	n := t.slice.Global // the global batch decides
	return c.Actor.PPOEpochs == 1 && c.Actor.MiniBatchSize >= n && !c.Algorithm.UseKLInReward
}

// lossStep is one micro-batch's loss and backward pass: it reads the
// model's outputs res for mb, fills out with the loss against norm, and
// back-propagates through mdl.
type lossStep func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error

// updateActor runs the policy's mini-batch updates with the actor loss.
func (t *Trainer) updateActor(b *Batch) (Metrics, error) {
	a := &t.Cfg.Actor
	lc := &a.LossConfig
	return t.update(b, t.Policy, t.ActorOpt, "actor", updateShape{a.UpdateConfig, lc.AggMode, lc.LossScaleFactor}, func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error {
		mb.LogProb = shiftIn(mb, nil, res.LogProb)
		mb.Entropy = shiftIn(mb, nil, res.Entropy)
		if b.OldLogProb == nil {
			mb.OldLogProb = mb.LogProb
		}
		if err := ActorLoss(mb, lc, norm, out); err != nil {
			return err
		}
		return mdl.Backward(shiftOut(mb, out.DLogProb), shiftOut(mb, out.DEntropy), nil)
	})
}

// updateCritic runs the value model's mini-batch updates with the clipped
// value loss.
func (t *Trainer) updateCritic(b *Batch) (Metrics, error) {
	c := &t.Cfg.Critic
	clip := c.CliprangeValue
	return t.update(b, t.Critic, t.CriticOpt, "critic", updateShape{c.UpdateConfig, c.AggMode, c.LossScaleFactor}, func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error {
		mb.Values = shiftIn(mb, nil, res.Values)
		if err := CriticLoss(mb, clip, norm, out); err != nil {
			return err
		}
		return mdl.Backward(nil, nil, shiftOut(mb, out.DValue))
	})
}

// updateShape is one model's update settings: its UpdateConfig and how its
// loss aggregates.
type updateShape struct {
	UpdateConfig
	agg   AggMode
	scale float64 // loss_scale_factor
}

// update runs ppo_epochs passes of mini-batch updates of mdl with gradient
// accumulation over micro-batches, all shaped by u, step computing each
// micro-batch's loss and gradients; prefix names the optimizer's metrics
// (actor/grad_norm).
func (t *Trainer) update(b *Batch, mdl *model.Model, opt *optim.AdamW, prefix string, u updateShape, step lossStep) (Metrics, error) {
	var all []Metrics
	for epoch := 0; epoch < u.PPOEpochs; epoch++ {
		for lo := 0; lo < b.NumSeqs(); lo += u.MiniBatchSize {
			hi := min(lo+u.MiniBatchSize, b.NumSeqs())
			mini := b.Slice(lo, hi)
			norm, err := NewNorm(u.agg, mini, u.scale)
			if err != nil {
				return nil, err
			}
			t.sync().ZeroGrads(mdl, opt) // ZeRO-2: the arena is kept zero, and the backward sends its buckets
			mm := Metrics{}
			own := t.slice.Own(mini, lo, hi) // this process's part of the global mini-batch
			cuts := MicroBatches(own, u.MicroBatchTokens)
			idle, err := t.sync().IdleRounds(mdl, opt, len(cuts)-1) // ZeRO-2: micro-batches short of the busiest rank's
			if err != nil {
				return nil, err
			}
			var out Output
			for j := 0; j+1 < len(cuts); j++ {
				mb := own.Slice(cuts[j], cuts[j+1])
				res, err := mdl.Forward(modelBatch(mb), true)
				if err != nil {
					return nil, err
				}
				if err := step(mdl, mb, res, norm, &out); err != nil {
					return nil, err
				}
				for k, v := range out.Metrics {
					if SumMetrics[k] {
						mm[k] += v
					} else {
						mm[k] += v / float64(len(cuts)-1)
					}
				}
			}
			t.sync().Idle(opt, idle)
			if mm, err = t.sync().ReduceMetrics(mm, len(cuts)-1); err != nil { // over the processes' micro-batches
				return nil, err
			}
			if opt.Offloaded() {
				mdl.DiscardActivations() // the moments come in: the activations make room
			}
			r, err := t.sync().Step(mdl, opt) // gradients summed over the processes
			if err != nil {
				return nil, err
			}
			mm[prefix+"/grad_norm"] = r.GradNorm
			mm[prefix+"/lr"] = r.LR
			if r.Skipped {
				mm[prefix+"/skipped_steps"] = 1
			}
			all = append(all, mm)
		}
	}
	return MeanMetrics(all), nil
}

// RolloutMetrics summarises trajectories under verl's names, num_turns/*
// and tool_call_counts/*, the share of each finish reason env/finish_*, and
// env/<name> for every metric the task's Outcome reports (the QA task's
// env/em, env/f1, env/cover_em, env/format): a new task adds metrics
// without touching this code.
func RolloutMetrics(trajs []*Trajectory) Metrics {
	m := Metrics{}
	turns, calls := make([]float64, len(trajs)), make([]float64, len(trajs))
	sums, counts := map[string]float64{}, map[string]float64{}
	finish := map[Finish]float64{}
	for i, t := range trajs {
		turns[i], calls[i] = float64(t.Turns), float64(t.ToolCalls)
		for k, v := range t.Outcome.Metrics {
			sums[k] += v
			counts[k]++
		}
		finish[t.Finish]++
	}
	n := float64(max(len(trajs), 1))
	m.putStats("num_turns", turns, nil)
	m.putStats("tool_call_counts", calls, nil)
	for k, s := range sums {
		m["env/"+k] = s / counts[k]
	}
	for _, f := range []Finish{FinishAnswer, FinishMaxTurns, FinishLength, FinishTurnLimit} {
		m["env/finish_"+string(f)] = finish[f] / n
	}
	return m
}
