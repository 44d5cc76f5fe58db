package main

import (
	_ "embed"
	"fmt"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
)

// Config is the whole configuration of a training run. The defaults are the
// embedded CPU run: the synthetic world, a tiny Qwen2, SFT then GRPO.
type Config struct {
	Model   agent.ModelConfig `yaml:"model"`
	Data    agent.DataConfig  `yaml:"data"`
	Env     agent.EnvConfig   `yaml:"env"`
	SFT     SFTConfig         `yaml:"sft"`
	RL      rl.TrainerConfig  `yaml:",inline"`
	Trainer TrainerConfig     `yaml:"trainer"`
	DP      dp.Config         `yaml:"dp"` // data parallel under mpirun/srun (cmd/train/dp.go)
}

// SFTConfig is the supervised warm start on the synthetic world's gold
// trajectories, or on a hasty teacher's made from them (EarlyAnswer).
type SFTConfig struct {
	Steps     int     `yaml:"steps" help:"optimizer steps (0: no warm start)"`
	BatchSize int     `yaml:"batch_size" help:"trajectories per step"`
	MaxHops   int     `yaml:"max_hops" help:"warm-start only on questions of at most this many hops (0: all)"`
	Fraction  float64 `yaml:"fraction" help:"share of the eligible questions used"`
	// EarlyAnswer is the synthetic world's hasty teacher (synth.Hasty).
	EarlyAnswer float64      `yaml:"early_answer" help:"chance that a demonstration answers before each search but the first (a hasty teacher; 0: gold)"`
	Optim       optim.Config `yaml:"optim"`
}

// TrainerConfig is the loop around the steps (verl's trainer.* keys).
type TrainerConfig struct {
	TotalSteps      int      `yaml:"total_training_steps" help:"RL steps"`
	SaveFreq        int      `yaml:"save_freq" help:"checkpoint every N steps (0: only at the end)"`
	TestFreq        int      `yaml:"test_freq" help:"validate every N steps (0: only before and after)"`
	Project         string   `yaml:"project_name"`
	Experiment      string   `yaml:"experiment_name"`
	DefaultLocalDir string   `yaml:"default_local_dir" help:"run folder: checkpoints, metrics, plots (default runs/{project}/{experiment})"`
	Logger          []string `yaml:"logger" help:"console, jsonl, tensorboard, progress"`
	Resume          bool     `yaml:"resume" help:"continue from the run folder's latest checkpoint"`
	// The device section every command shares (trainer.device,
	// trainer.device_memory, trainer.dry_run): the device and the memory
	// plan (device.go, plan.go).
	devsel.Config `yaml:",inline"`
	StopAfter     int `yaml:"stop_after" help:"stop after this many RL steps of this invocation (0: run to the end; tests use it to kill a run)"`
	// MaxToolErrorRate stops the run when more of a step's executed tool
	// calls fail (rl.CheckToolFaults); 0 only warns.
	MaxToolErrorRate float64 `yaml:"max_tool_error_rate" help:"stop when a step's share of failed tool calls is above this (0: off, only a warning past one half)"`
	Recompute        bool    `yaml:"recompute" help:"recompute activations in the backward (activation checkpointing): less memory, one more forward"`
	SaveDType        string  `yaml:"save_dtype" help:"checkpoint weights: auto (the source model's dtype), bfloat16, float32 or float16"`
	// RefOffload keeps the reference policy's weights in a file mapping
	// (rl.Setup.RefOffloadDir), in OffloadDir or else $TMPDIR.
	RefOffload bool `yaml:"ref_offload" help:"CPU: keep the reference policy's weights in a file mapping, resident only while it scores (frees their memory for the rollout and the update)"`
	// OptimOffload keeps the AdamW moments in file mappings
	// (rl.Setup.OptimOffloadDir), in OffloadDir or else $TMPDIR.
	OptimOffload bool   `yaml:"optim_offload" help:"CPU: keep the AdamW moments in file mappings, resident only during the optimizer step (the activations make room for them)"`
	OffloadDir   string `yaml:"offload_dir" help:"directory on a disk for the files of trainer.ref_offload and trainer.optim_offload (empty: $TMPDIR or /tmp)"`

	// Run folder, checkpoint keeping, rollout dump, divergence (guard.go, divergence.go).
	GuardConfig `yaml:",inline"`
	// trainer.async: the rollout on a goroutine of its own (rl/async.go, async.go).
	rl.AsyncConfig `yaml:",inline"`
}

// defaultProfile is the embedded run's departures from the library
// defaults, with the reasons for each.
//
//go:embed default.yaml
var defaultProfile []byte

// DefaultConfig returns the embedded default run: the library defaults
// (rl.DefaultTrainerConfig, agent's data and environment, optim's AdamW)
// with default.yaml laid over them.
func DefaultConfig() Config {
	c := Config{
		// A vocabulary of 2048 makes most entity names single tokens, which a
		// model this small copies from search results far more reliably than
		// multi-token names (held-out runs: 1024 tokens, 393 of 460 names
		// split; 2048 tokens, copying mostly right).
		Model: agent.ModelConfig{Hidden: 192, Layers: 3, Heads: 6, KVHeads: 2, Intermediate: 512,
			TokenizerVocab: 2048, Seed: 1, MaxContext: 1280},
		Data: agent.DefaultDataConfig(),
		Env:  agent.DefaultEnvConfig(),
		// The warm start imitates a hasty teacher (synth.Hasty): every
		// question's demonstration, but one that answers before each search
		// after the first with chance 0.6. The policy learns the format,
		// the queries and the copying from it, and its teacher's habit of
		// answering early, which the outcome reward then unlearns. The loss
		// sits near 0.9 for 100-250 steps, depending on the seed, before the
		// policy learns to copy names from the observations; 800 steps with a
		// cosine decay (default.yaml) copy them well enough that RL reaches
		// 0.653 ± 0.177 held-out EM over three seeds, where 600 left it at
		// 0.480 ± 0.207 and 400 at a constant lr at 0.192 ± 0.198, held back
		// by miscopied names (benchmarks/learning.md).
		SFT: SFTConfig{Steps: 800, BatchSize: 16, Fraction: 1, EarlyAnswer: 0.6, Optim: optim.DefaultConfig()},
		RL:  rl.DefaultTrainerConfig(),
		DP:  dp.DefaultConfig(),
		Trainer: TrainerConfig{TotalSteps: 30, SaveFreq: 10, TestFreq: 10, Project: "r1go", Experiment: "synthetic-grpo",
			Logger: []string{"console", "jsonl", "tensorboard"}, Config: devsel.Default(), SaveDType: "auto"},
	}
	if err := config.Apply(&c, "cmd/train/default.yaml", defaultProfile); err != nil {
		panic(err) // the embedded file is wrong; TestDefaultProfile catches it
	}
	c.Trainer.GuardConfig = defaultGuard()
	return c
}

// Validate checks every setting before any work: each section's own
// Validate (the config loader also runs them one by one, naming the key),
// then the parts no section checks alone. run calls it before it creates
// the run folder, so a config built in Go is checked as a loaded one is.
func (c *Config) Validate() error {
	for _, s := range []struct {
		key string
		v   interface{ Validate() error }
	}{{"data", &c.Data}, {"env", &c.Env}, {"sft", &c.SFT}, {"sft.optim", &c.SFT.Optim}, {"trainer", &c.Trainer}, {"dp", &c.DP}} {
		if err := s.v.Validate(); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	if err := c.RL.Validate(); err != nil {
		return err
	}
	if err := c.validateTrajectory(); err != nil {
		return err
	}
	if err := c.validateAsync(); err != nil {
		return err
	}
	if err := c.RL.Actor.LoRA.Validate(); err != nil {
		return fmt.Errorf("actor.%w", err)
	}
	return nil
}

// Validate reports a warm start that cannot run.
func (c *SFTConfig) Validate() error {
	if c.Steps < 0 {
		return fmt.Errorf("steps %d must be ≥ 0", c.Steps)
	}
	if c.BatchSize < 1 {
		return fmt.Errorf("batch_size %d must be ≥ 1", c.BatchSize)
	}
	if c.MaxHops < 0 {
		return fmt.Errorf("max_hops %d must be ≥ 0", c.MaxHops)
	}
	if !(c.Fraction > 0 && c.Fraction <= 1) {
		return fmt.Errorf("fraction %v must lie in (0, 1]", c.Fraction)
	}
	if !(c.EarlyAnswer >= 0 && c.EarlyAnswer <= 1) {
		return fmt.Errorf("early_answer %v must lie in [0, 1]", c.EarlyAnswer)
	}
	return nil
}

// Validate reports negative counts, an unknown device, dtype or memory size.
func (c *TrainerConfig) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"total_training_steps", c.TotalSteps}, {"save_freq", c.SaveFreq}, {"test_freq", c.TestFreq}, {"stop_after", c.StopAfter}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d must be ≥ 0", f.key, f.v)
		}
	}
	if !(c.MaxToolErrorRate >= 0 && c.MaxToolErrorRate <= 1) {
		return fmt.Errorf("max_tool_error_rate %v must lie in [0, 1] (0: off)", c.MaxToolErrorRate)
	}
	if _, err := model.SaveDTypeFor(&model.Config{}, c.SaveDType); err != nil {
		return fmt.Errorf("save_dtype: %w", err)
	}
	return c.Config.Validate()
}

// validateTrajectory checks the settings of whole and step mode that span
// sections: the context policy (env.context) is step mode's; an estimator
// that credits each packed sequence as a trajectory cannot take the turns
// of a context that rewrites; and the window must hold a whole trajectory
// (whole mode) or one turn after the longest prompt (step mode, where the
// context policy keeps each turn's context inside it).
func (c *Config) validateTrajectory() error {
	ro := &c.RL.Rollout
	step := ro.Trajectory == rl.TrajectoryStep
	if !step && c.Env.Context.Policy != env.ContextFull {
		return fmt.Errorf("env.context %s builds the prompts of step mode: set rollout.trajectory=step (or env.context=full)", c.Env.Context.Policy)
	}
	if step && (c.Env.Context.Policy != env.ContextFull || !ro.MergePrefix) && !c.RL.Needs().Trajectories {
		return fmt.Errorf("algorithm.adv_estimator %s credits each packed sequence as a trajectory, and rollout.trajectory=step with env.context %s (merge_prefix %v) packs a trajectory as several: use one that credits trajectories (grpo, rloo, reinforce_plus_plus_baseline, step_gae, step_grpo, step_rloo)",
			c.RL.Algorithm.Estimator, c.Env.Context.Policy, ro.MergePrefix)
	}
	if ro.MaxTurnTokens > ro.MaxResponseTokens {
		return fmt.Errorf("rollout.max_turn_tokens %d exceeds rollout.max_response_tokens %d: a turn is part of the trajectory's budget", ro.MaxTurnTokens, ro.MaxResponseTokens)
	}
	if step {
		if c.Model.MaxContext <= ro.MaxPromptTokens+ro.MaxTurnTokens {
			return fmt.Errorf("model.max_context %d must exceed rollout.max_prompt_tokens + rollout.max_turn_tokens (%d): a turn's context must fit the window",
				c.Model.MaxContext, ro.MaxPromptTokens+ro.MaxTurnTokens)
		}
		return nil
	}
	if c.Model.MaxContext < ro.MaxPromptTokens+ro.MaxResponseTokens {
		return fmt.Errorf("model.max_context %d is below rollout.max_prompt_tokens + rollout.max_response_tokens (%d)",
			c.Model.MaxContext, ro.MaxPromptTokens+ro.MaxResponseTokens)
	}
	return nil
}
