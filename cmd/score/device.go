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

// devOptions are the device flags.
type devOptions struct {
	device, memory string
	dryRun         bool
	log            io.Writer // the plan and the device line (stderr: stdout may carry the output)
}

// open plans the scoring run from config.json, then opens the device; a dry
// run plans for the named kind without opening anything and stops.
func (o devOptions) open(modelDir string, batchTokens int) (dev model.Device, stop bool, err error) {
	cfg, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return nil, true, err
	}
	s := plan.Settings{Device: "cpu", MicroBatchTokens: batchTokens, Threads: runtime.GOMAXPROCS(0),
		Keys: map[string]string{"micro_batch": "-batch-tokens", "recompute": "", "slots": ""}}
	if o.dryRun {
		if o.device == "cuda" || o.device == "auto" && cuda.AutoPicksGPU {
			s.Device = "cuda"
		}
	} else {
		var note string
		if dev, note, err = cuda.Pick(o.device); err != nil {
			return nil, true, fmt.Errorf("score: %w", err)
		}
		fmt.Fprintln(o.log, note)
		s.Device, s.Capacity = cuda.Kind(dev), cuda.Capacity(dev)
	}
	if s.Device == "cpu" {
		s.Capacity = plan.HostMemory()
	}
	if o.memory != "" {
		if s.Capacity, err = plan.ParseSize(o.memory); err != nil {
			return nil, true, fmt.Errorf("score: -device-memory: %w", err)
		}
	}
	p, err := plan.New(cfg, s)
	if err != nil {
		return nil, true, err
	}
	stop, err = plan.Report(o.log, p, cfg, o.dryRun)
	return dev, stop, err
}
