package rl

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// AlgorithmConfig selects the estimator and how rewards are shaped
// (verl's algorithm.* keys, Agent-R1's masks). The estimator's own settings
// are the embedded AdvantageConfig, read by the estimator as they are.
type AlgorithmConfig struct {
	AdvantageConfig `yaml:",inline"`
	AdvantageMask   bool `yaml:"advantage_mask" help:"credit only the model's own tokens (false: the paper's ablation)"`
	// LossMask false is the paper's "loss mask disabled" ablation: the
	// actor's loss (and its KL and entropy terms) runs over every response
	// token, tool output and chat markup included, with the advantages
	// the advantage mask gave them (doc.go).
	LossMask      bool    `yaml:"loss_mask" help:"train only the model's own tokens (false: the paper's ablation, environment tokens trained too)"`
	UseKLInReward bool    `yaml:"use_kl_in_reward" help:"subtract beta*KL(old||ref) from the token rewards"`
	KLPenalty     string  `yaml:"kl_penalty" help:"KL estimator for the in-reward penalty"`
	KLCtrl        string  `yaml:"kl_ctrl" help:"fixed or adaptive"`
	KLCoef        float64 `yaml:"kl_coef" help:"initial beta of the in-reward KL"`
	KLTarget      float64 `yaml:"kl_target" help:"adaptive controller target KL"`
	KLHorizon     float64 `yaml:"kl_horizon" help:"adaptive controller horizon"`
	ProcessReward bool    `yaml:"use_process_rewards" help:"add the environment's per-tool-call rewards"`
	PrimeNorm     bool    `yaml:"prime_norm" help:"PRIME-style normalisation of process rewards"`
	// RolloutCorrection corrects for the sampler's drift from the trainer (rollcorr.go).
	RolloutCorrection RolloutCorrectionConfig `yaml:"rollout_correction"`
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
	if err := c.RolloutCorrection.Validate(); err != nil {
		return fmt.Errorf("rollout_correction: %w", err)
	}
	if rc := &c.RolloutCorrection; !c.LossMask && (rc.active() || rc.BypassMode) {
		return fmt.Errorf("loss_mask false trains environment tokens, which have no sampling log-probability to correct with: it does not go with rollout_correction")
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
		Algorithm: AlgorithmConfig{AdvantageConfig: adv, AdvantageMask: true, LossMask: true,
			KLPenalty: "kl", KLCtrl: "fixed", KLCoef: 0.001, KLTarget: 0.1, KLHorizon: 10000,
			RolloutCorrection: DefaultRolloutCorrectionConfig()},
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
	if !c.Algorithm.LossMask && c.Rollout.TruncationLoss == TruncationMask {
		return fmt.Errorf("algorithm.loss_mask false trains every response token, which would put back the truncated trajectories rollout.truncation_loss mask takes out: use one of the two")
	}
	if !c.Algorithm.LossMask && c.Actor.PolicyLoss == "decoupled" {
		return fmt.Errorf("algorithm.loss_mask false trains environment tokens, which have no behaviour log-probability for actor.policy_loss decoupled")
	}
	return c.rollcorrValidate() // settings of two sections that do not go together (rollcorr_trainer.go)
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
