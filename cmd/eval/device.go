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
	mc, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return nil, true, err
	}
	s := plan.Settings{Device: "cpu", BaseModel: base, RolloutSlots: cfg.Slots, MaxContext: cfg.MaxContext,
		MaxPromptTokens: max(cfg.MaxContext-cfg.MaxResp, 1), GroupSize: 1, Threads: runtime.GOMAXPROCS(0),
		Keys: map[string]string{"slots": "slots", "micro_batch": "", "recompute": ""}}
	mode := d.Device
	if mode == "" {
		mode = "auto"
	}
	if d.DryRun {
		if mode == "cuda" || mode == "auto" && cuda.AutoPicksGPU {
			s.Device = "cuda"
		}
	} else {
		var note string
		if dev, note, err = cuda.Pick(mode); err != nil {
			return nil, true, err
		}
		fmt.Fprintln(out, note)
		s.Device, s.Capacity = cuda.Kind(dev), cuda.Capacity(dev)
	}
	if s.Device == "cpu" {
		s.Capacity = plan.HostMemory()
	}
	if d.DeviceMemory != "" {
		if s.Capacity, err = plan.ParseSize(d.DeviceMemory); err != nil {
			return nil, true, fmt.Errorf("device_memory: %w", err)
		}
	}
	p, err := plan.New(mc, s)
	if err != nil {
		return nil, true, err
	}
	stop, err = plan.Report(out, p, mc, d.DryRun)
	return dev, stop, err
}
