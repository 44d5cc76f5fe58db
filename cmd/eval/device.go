package main

import (
	"io"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// openDevice prints the evaluation's memory plan (the policy, a base model
// when the base-tool-call baseline runs, the KV cache of rollout slots ×
// max_context and a decode step's activations) and opens the device of
// cfg's device section; a dry run opens nothing and stops after the plan.
func openDevice(cfg Config, base bool, modelDir string, out io.Writer) (dev model.Device, stop bool, err error) {
	slots := cfg.Rollout.Slots
	if n := cfg.Data.ValSize; n > 0 {
		slots = cfg.Rollout.SlotsFor(n) // Evaluate decodes at most the questions it has
	}
	s := plan.Settings{BaseModel: base, RolloutSlots: slots, MaxContext: cfg.MaxContext,
		MaxPromptTokens: max(cfg.MaxContext-cfg.Rollout.MaxResponseTokens, 1), GroupSize: cfg.Rollout.N, PrefillTokens: cfg.Rollout.PrefillTokens,
		Keys: map[string]string{"slots": "rollout.slots", "micro_batch": "", "recompute": ""}}
	return cfg.Device.Open(modelDir, s, out)
}
