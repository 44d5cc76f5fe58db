package main

import (
	"io"

	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// DeviceConfig chooses the device and checks the memory plan.
type DeviceConfig struct {
	Device       string `yaml:"device" help:"auto, cpu or cuda"`
	DeviceMemory string `yaml:"device_memory" help:"device memory to plan for, e.g. 80GiB (empty: the device's own)"`
	DryRun       bool   `yaml:"dry_run" help:"print the memory plan (from config.json alone) and exit"`
}

// open prints the evaluation's memory plan (the policy, a base model when
// the base-tool-call baseline runs, the KV cache of slots × max_context and
// a decode step's activations) and opens the device; a dry run opens
// nothing and stops after the plan.
func (d DeviceConfig) open(cfg Config, base bool, modelDir string, out io.Writer) (dev model.Device, stop bool, err error) {
	slots := cfg.Slots
	if n := cfg.Data.ValSize; n > 0 {
		slots = min(slots, n) // Evaluate decodes at most the questions it has
	}
	s := plan.Settings{BaseModel: base, RolloutSlots: slots, MaxContext: cfg.MaxContext,
		MaxPromptTokens: max(cfg.MaxContext-cfg.MaxResp, 1), GroupSize: 1,
		Keys: map[string]string{"slots": "slots", "micro_batch": "", "recompute": ""}}
	o := devsel.Options{Device: d.Device, Memory: d.DeviceMemory, DryRun: d.DryRun, MemoryKey: "device_memory", Log: out}
	return o.Open(modelDir, s)
}
