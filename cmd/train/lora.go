package main

import (
	"fmt"
	"path/filepath"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// LoRA runs (actor.lora.rank > 0): the loaded policy is frozen and gets
// fresh adapters, which SFT and RL train in its place; the reference
// policy is the frozen base itself (no second copy); checkpoints hold the
// adapters as a PEFT folder (actor_adapter/) beside the merged HF folder
// (actor/), and a resumed run restores the adapters.

// adapterDir is where a checkpoint keeps the PEFT folder.
const adapterDir = "actor_adapter"

// setupLoRA freezes the policy and attaches adapters when the config asks.
func setupLoRA(cfg *Config, s *agent.Setup) error {
	lc := cfg.RL.Actor.LoRA
	if err := lc.Validate(); err != nil {
		return fmt.Errorf("actor.%w", err)
	}
	if !lc.Enabled() {
		return nil
	}
	s.Policy.Freeze()
	if _, err := s.Policy.AttachLoRA(lc, cfg.Model.Seed^0x10a); err != nil {
		return fmt.Errorf("actor.%w", err)
	}
	return nil
}

// loraRef is the reference policy of a LoRA run: the frozen base.
func loraRef(s *agent.Setup) *model.Model {
	if s.Policy.Adapters() == nil {
		return nil
	}
	return s.Policy.Base()
}

// saveAdapter writes the policy's adapters into a checkpoint folder.
func saveAdapter(tr *rl.Trainer, dir string) error {
	lo := tr.Policy.Adapters()
	if lo == nil {
		return nil
	}
	return lo.SaveAdapter(filepath.Join(dir, adapterDir), tr.Policy.Dev, "")
}

// restorePolicy loads a checkpoint's policy: its adapters in a LoRA run,
// its weights otherwise.
func restorePolicy(m *model.Model, ckpt string) error {
	if m.Adapters() != nil {
		return m.RestoreAdapter(filepath.Join(ckpt, adapterDir))
	}
	return loadWeights(m, masterOr(ckpt, "actor"))
}
