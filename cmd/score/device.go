package main

import (
	"fmt"
	"io"

	"github.com/r1go/r1go/internal/devsel"
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
	s := plan.Settings{MicroBatchTokens: batchTokens,
		Keys: map[string]string{"micro_batch": "-batch-tokens", "recompute": "", "slots": ""}}
	d := devsel.Options{Device: o.device, Memory: o.memory, DryRun: o.dryRun, MemoryKey: "-device-memory", Log: o.log}
	dev, stop, err = d.Open(modelDir, s)
	if err != nil {
		err = fmt.Errorf("score: %w", err)
	}
	return dev, stop, err
}
