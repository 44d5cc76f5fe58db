package main

import (
	"fmt"
	"io"

	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// openDevice plans the scoring run from config.json, then opens the device
// of d, printing the device line and the plan to log (stderr: stdout may
// carry the output); a dry run plans for the named kind without opening
// anything and stops.
func openDevice(d devsel.Config, modelDir string, batchTokens int, log io.Writer) (dev model.Device, stop bool, err error) {
	s := plan.Settings{MicroBatchTokens: batchTokens,
		Keys: map[string]string{"micro_batch": "-batch-tokens", "recompute": "", "slots": ""}}
	dev, stop, err = d.Open(modelDir, s, log)
	if err != nil {
		err = fmt.Errorf("score: %w", err)
	}
	return dev, stop, err
}
