package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// planRun prints the run's memory plan, from config.json (or the tiny
// model's settings) and the run's settings alone, and says whether the run
// stops: always under trainer.dry_run, with an error when the plan does not
// fit the device. dev is nil in a dry run, which opens no device: it plans
// for trainer.device (auto meaning what cuda.Pick would choose, read from
// cuda.AutoPicksGPU without opening a GPU) and trainer.device_memory.
func planRun(cfg *Config, dev model.Device, out io.Writer) (stop bool, err error) {
	mc, err := planModelConfig(cfg)
	if err != nil {
		return true, err
	}
	s := plan.Settings{Device: "cpu", Train: true, Reference: cfg.RL.NeedsRef(), Critic: cfg.RL.NeedsCritic(),
		Recompute: cfg.Trainer.Recompute, MicroBatchTokens: cfg.RL.Actor.MicroBatchTokens,
		RolloutSlots: min(cfg.Trainer.RolloutSlots, cfg.Data.TrainBatchSize*cfg.RL.Rollout.N), MaxContext: cfg.Model.MaxContext,
		MaxPromptTokens: cfg.RL.Rollout.MaxPromptTokens, GroupSize: cfg.RL.Rollout.N, Threads: runtime.GOMAXPROCS(0)}
	switch {
	case dev != nil:
		s.Device, s.Capacity = cuda.Kind(dev), cuda.Capacity(dev)
	case cfg.Trainer.Device == "cuda" || cfg.Trainer.Device == "auto" && cuda.AutoPicksGPU:
		s.Device = "cuda"
	}
	if s.Device == "cpu" && s.Capacity == 0 {
		s.Capacity = plan.HostMemory()
	}
	if cfg.Trainer.DeviceMemory != "" {
		if s.Capacity, err = plan.ParseSize(cfg.Trainer.DeviceMemory); err != nil {
			return true, fmt.Errorf("trainer.device_memory: %w", err)
		}
	}
	p, err := plan.New(mc, s)
	if err != nil {
		return true, err
	}
	return plan.Report(out, p, mc, cfg.Trainer.DryRun)
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
