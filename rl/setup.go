package rl

import (
	"errors"
	"fmt"

	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/optim"
)

// Setup is what a Trainer is built from besides its config: the policy,
// where the frozen copies come from, the tokenizer and environment of the
// rollout, and the run's length. It is a struct, not a parameter list, so
// that later parts (a data-parallel communicator, an external rollout
// engine, LoRA adapters) are new fields with a zero value that means "off".
type Setup struct {
	Policy *model.Model
	// RefDir is the folder the reference policy and the critic are loaded
	// from (the warm-started policy). Needed when the config uses a
	// reference (a KL term) or a critic (gae).
	RefDir string
	// Ref, when not nil, is the reference policy already built (a LoRA
	// run's frozen base); otherwise it is loaded frozen from RefDir.
	Ref *model.Model
	// Recompute makes the critic recompute its activations in the
	// backward, as the policy does when its own Recompute is set.
	Recompute bool
	// SaveBytes is the critic's bound on saved layer activations, as the
	// policy's (model.Model.SaveBytes; 0: the automatic one).
	SaveBytes int64
	// RefOffloadDir, when set, keeps the loaded reference policy's weights
	// in a file mapping there (model.Model.SpillWeights; host memory
	// only): resident while it scores, dropped from the resident set
	// after, so that the update has its memory.
	RefOffloadDir string
	// OptimOffloadDir, when set, keeps the AdamW moments of the actor and
	// the critic in file mappings there (optim.AdamW.Offload; host memory
	// only): resident during the optimizer step only, before which the
	// model's activations are given back (model.Model.DiscardActivations).
	OptimOffloadDir string

	Tok         *tokenizer.Tokenizer
	Env         env.Environment
	Stop        []int32 // token ids that end a model turn
	ToolCallEnd int32   // token that ends a tool call (process rewards)

	Slots      int // KV cache slots of the rollout (trajectories decoded together)
	MaxContext int // positions per slot

	// TotalSteps and PromptsPerStep size the optimizers' learning-rate
	// schedules: the actor and the critic each take one optimizer step per
	// mini-batch of each epoch of their own UpdateConfig.
	TotalSteps     int
	PromptsPerStep int

	// Sync is the data-parallel part (nil: Local, one process). It is
	// known before the optimizers are built because with dp.zero1 each rank
	// allocates only its shard of their moments (Sync.NewOptimizer).
	Sync Sync
}

// NewTrainer validates cfg and wires a Trainer: the rollout over the policy
// (its settings are cfg.Rollout, held once), the reference policy and the
// critic loaded from s.RefDir when cfg needs them, the in-reward KL
// controller, and the AdamW optimizers.
func NewTrainer(cfg TrainerConfig, s Setup) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s.Policy == nil {
		return nil, errors.New("rl: NewTrainer needs a policy")
	}
	if s.Slots < 1 || s.MaxContext < 1 || s.TotalSteps < 0 || s.PromptsPerStep < 1 {
		return nil, fmt.Errorf("rl: NewTrainer: slots %d, max context %d and prompts per step %d must be ≥ 1, total steps %d ≥ 0",
			s.Slots, s.MaxContext, s.PromptsPerStep, s.TotalSteps)
	}
	t := &Trainer{Cfg: cfg, Policy: s.Policy, ToolCallEnd: s.ToolCallEnd, KLCtrl: cfg.NewKLController(), Sync: s.Sync}
	if t.Sync == nil {
		t.Sync = Local{}
	}
	var err error
	sampler := s.Policy
	if cfg.Rollout.DType == "bfloat16" {
		switch {
		case s.Policy.Adapters() != nil:
			return nil, errors.New("rl: rollout.dtype bfloat16 with LoRA adapters: the rollout reads the frozen base (bf16 when its folder is) and the float32 adapters, no copy")
		case t.sync().ShardsMasters():
			return nil, errors.New("rl: rollout.dtype bfloat16 with dp.shard_masters: no rank holds the whole float32 policy to copy")
		}
		// Rounded from the float32 masters before each rollout (Step).
		if t.rolloutCopy, err = s.Policy.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true}); err != nil {
			return nil, fmt.Errorf("rl: rollout.dtype bfloat16: %w", err)
		}
		sampler = t.rolloutCopy
	}
	t.Rollout = &Rollout{Cfg: &t.Cfg.Rollout, Policy: NewModelPolicy(sampler, s.Slots, s.MaxContext),
		Tok: s.Tok, Env: s.Env, Stop: s.Stop}
	if cfg.NeedsRef() || cfg.NeedsCritic() {
		if s.RefDir == "" {
			return nil, errors.New("rl: the config uses a reference policy or a critic and Setup.RefDir is empty")
		}
	}
	if t.Ref = s.Ref; cfg.NeedsRef() && t.Ref == nil {
		// Frozen: no gradient arena, stored as RefDType says.
		mp, ok := s.Policy.Dev.(model.MixedPrecision)
		opts := model.LoadOptions{Frozen: true, DType: RefDType(ok && mp.Mixed())}
		if t.Ref, err = model.LoadWith(s.RefDir, s.Policy.Dev, model.LMHeadOutput, opts); err != nil {
			return nil, err
		}
		if s.RefOffloadDir != "" {
			if err := t.Ref.SpillWeights(s.RefOffloadDir); err != nil {
				return nil, fmt.Errorf("rl: offloading the reference policy: %w", err)
			}
		}
	} else if s.RefOffloadDir != "" && cfg.NeedsRef() {
		return nil, errors.New("rl: the reference policy is the run's own (a LoRA run's frozen base, read by every forward): it cannot be offloaded")
	}
	if cfg.NeedsCritic() {
		if t.Critic, err = model.Load(s.RefDir, s.Policy.Dev, model.ValueHeadOutput); err != nil {
			return nil, err
		}
		t.Critic.Recompute, t.Critic.SaveBytes = s.Recompute, s.SaveBytes
		steps := cfg.Critic.OptimizerSteps(s.TotalSteps, s.PromptsPerStep*cfg.Rollout.N)
		if t.CriticOpt, err = t.sync().NewOptimizer(t.Critic.Dev, t.Critic.Params, t.Critic.Grads, cfg.Critic.Optim, steps); err != nil {
			return nil, err
		}
	}
	a := &cfg.Actor
	steps := a.OptimizerSteps(s.TotalSteps, s.PromptsPerStep*cfg.Rollout.N)
	params, grads := s.Policy.Trainable() // the adapters in a LoRA run
	if t.ActorOpt, err = t.sync().NewOptimizer(s.Policy.Dev, params, grads, a.Optim, steps); err != nil {
		return nil, err
	}
	if s.OptimOffloadDir != "" {
		for _, o := range []*optim.AdamW{t.ActorOpt, t.CriticOpt} {
			if o != nil {
				if err := o.Offload(s.OptimOffloadDir); err != nil {
					return nil, fmt.Errorf("rl: %w", err)
				}
			}
		}
	}
	if t.sync().ShardsMasters() && s.Policy.Adapters() == nil { // data parallel: the policy's masters only
		if err := t.sync().ShardMasters(s.Policy, t.ActorOpt); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// RefDType is the dtype the frozen reference policy is loaded in
// (model.LoadOptions.DType) on a device that does or does not compute in
// mixed precision: bfloat16 on one that does, which would read only a
// bf16 copy of float32 weights (the CUDA device rounds float32 sources
// once, at load); otherwise auto, bf16 exactly when the folder stores bf16
// (lossless).
func RefDType(mixed bool) string {
	if mixed {
		return "bfloat16"
	}
	return "auto"
}

// RefStoresBF16 says whether the reference loaded as RefDType says holds
// bf16 weights, for a folder that stores folderDType (its config's
// torch_dtype): the memory plan counts the reference so.
func RefStoresBF16(folderDType string, mixed bool) bool {
	return RefDType(mixed) == "bfloat16" || folderDType == "bfloat16"
}
