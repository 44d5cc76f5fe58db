package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/rl"
)

// planRun prints the run's memory plan, from config.json (or the tiny
// model's settings) and the run's settings alone, and says whether the run
// stops: always under trainer.dry_run, with an error when the plan does not
// fit the device. dev is nil in a dry run, which opens no device: the
// device section plans for what it would open (devsel.Config.Settle).
func planRun(cfg *Config, l comm.Launch, dev model.Device, out io.Writer) (stop bool, saveBytes int64, err error) {
	mc, err := planModelConfig(cfg)
	if err != nil {
		return true, 0, err
	}
	s := plan.Settings{Device: "cpu", Train: true, Reference: cfg.RL.NeedsRef(), Critic: cfg.RL.NeedsCritic(),
		Recompute: cfg.Trainer.Recompute, MicroBatchTokens: cfg.RL.Actor.MicroBatchTokens,
		RolloutSlots: cfg.RL.Rollout.SlotsFor(cfg.Data.TrainBatchSize), MaxContext: cfg.Model.MaxContext,
		MaxPromptTokens: cfg.RL.Rollout.MaxPromptTokens, GroupSize: cfg.RL.Rollout.N, PrefillTokens: cfg.RL.Rollout.PrefillTokens,
		// Validation and the test after RL decode in the rollout's cache
		// (run), all its slots prefilling at once, or, beside a bf16
		// rollout copy or external agents, in a cache of their own of up to
		// rollout.slots (fewer only for fewer questions, which are not
		// loaded yet).
		EvalSlots:    min(cfg.RL.Rollout.SlotsFor(cfg.Data.TrainBatchSize), evalQuestions(cfg)),
		EvalOwnCache: cfg.RL.Rollout.DType == "bfloat16" || cfg.RL.Rollout.Mode == "external",
		StateBF16:    cfg.RL.Actor.Optim.StateDType == "bfloat16", CriticStateBF16: cfg.RL.Critic.Optim.StateDType == "bfloat16",
		RolloutBF16: cfg.RL.Rollout.DType == "bfloat16" && !cfg.RL.Actor.LoRA.Enabled() && !cfg.Trainer.Async,
		RefOffload:  cfg.Trainer.RefOffload, OptimOffload: cfg.Trainer.OptimOffload}
	if cfg.RL.Rollout.Trajectory == rl.TrajectoryStep && cfg.Env.Context.Policy != env.ContextFull {
		s.RewriteTokens = cfg.Model.MaxContext // a rewritten context refills its slot at once
	}
	if s.EvalOwnCache {
		s.EvalSlots = min(cfg.RL.Rollout.Slots, evalQuestions(cfg))
	}
	if rc := cfg.RL.Rollout; cfg.Trainer.Async && cfg.DP.RolloutRanks == 0 { // startAsync's copy and cache
		s.AsyncSlots, s.AsyncBF16 = rc.SlotsFor(cfg.Data.TrainBatchSize*(rc.MaxStaleness+1)), rc.DType == "bfloat16"
	}
	// A data-parallel run plans one rank: the launcher's world size (a dry
	// run can be planned for N ranks with WORLD_SIZE=N RANK=0). With
	// rollout ranks it plans trainer rank 0, over the trainer ranks; a
	// rollout rank holds the policy, its copy and the cache of its share,
	// and no optimizer.
	if ranks := l.Size - cfg.DP.RolloutRanks; ranks > 1 {
		s.Ranks, s.Zero1, s.Zero, s.BucketMB = ranks, cfg.DP.Zero1, cfg.DP.Zero, cfg.DP.BucketMB
		s.CUDAPaging = cfg.DP.ShardMasters
	}
	if lc := cfg.RL.Actor.LoRA; lc.Enabled() {
		if err := lc.Validate(); err != nil {
			return true, 0, fmt.Errorf("actor.%w", err)
		}
		s.LoRARank, s.LoRATargets = lc.Rank, lc.TargetModules
		s.FrozenBF16 = cfg.Model.Path != "" && mc.DType == "bfloat16" // the base loads frozen (run)
	}
	if err := cfg.Trainer.Settle(&s, dev); err != nil {
		return true, 0, fmt.Errorf("trainer.%w", err)
	}
	switch g, ok := dev.(*cuda.Device); {
	case ok:
		on, _ := g.VMM()
		s.CUDANoVMM = !on // no VMM: ZeRO-2's gradient arena stays whole
	case dev == nil && s.Device == "cuda":
		s.Precision = "bf16-mixed" // a dry run for a GPU: the CUDA device is a MixedPrecision
	}
	if _, ok := dev.(model.MixedPrecision); ok {
		s.Precision = "bf16-mixed"
	}
	// The reference is the warm start that initialPolicy names, stored as
	// NewTrainer loads it (rl.RefDType): the SFT folder is saved as float32,
	// but with no SFT it is model.path itself, whose torch_dtype (the
	// config's word for the stored dtype) may be bf16. A LoRA run's
	// reference is the frozen base.
	refDType := "float32"
	if refDir, _ := initialPolicy(cfg, ""); cfg.Model.Path != "" && refDir == cfg.Model.Path {
		refDType = mc.DType
	}
	s.RefBF16 = rl.RefStoresBF16(refDType, s.Precision == "bf16-mixed")
	p, err := plan.New(mc, s)
	if err != nil {
		return true, 0, err
	}
	// A GPU with room keeps every layer's activations (run.go gives the
	// models this bound): the backward skips one forward of each layer.
	s, p = plan.KeepLayers(mc, s, p)
	saveBytes = s.SaveBytes
	stop, err = plan.Report(out, p, mc, cfg.Trainer.DryRun)
	return stop, saveBytes, err
}

// planModelConfig reads model.path's config.json, or describes the tiny
// model made on the spot (its vocabulary is the tokenizer's, trained later:
// tokenizer_vocab plus room for the added tokens).
func planModelConfig(cfg *Config) (*model.Config, error) {
	if cfg.Model.Path != "" {
		return model.LoadConfig(filepath.Join(cfg.Model.Path, "config.json"))
	}
	m := cfg.Model
	raw := fmt.Sprintf(`{"model_type": "qwen2", "hidden_size": %d, "intermediate_size": %d, "num_hidden_layers": %d,
		"num_attention_heads": %d, "num_key_value_heads": %d, "vocab_size": %d, "tie_word_embeddings": true}`,
		m.Hidden, m.Intermediate, m.Layers, m.Heads, m.KVHeads, m.TokenizerVocab+64)
	return model.ParseConfig([]byte(raw), "tiny model settings")
}

// evalQuestions bounds the questions an evaluation of the run decodes at
// once, before the data is loaded: the synthetic world's data.synth_eval
// (its validation and test sets have that many each), or data.val_size of
// validation files (the held-out set then); all of them (unbounded) when
// val_size is 0.
func evalQuestions(cfg *Config) int {
	switch {
	case len(cfg.Data.ValFiles) == 0:
		return max(cfg.Data.SynthEval, 1)
	case cfg.Data.ValSize > 0:
		return cfg.Data.ValSize
	}
	return math.MaxInt
}
