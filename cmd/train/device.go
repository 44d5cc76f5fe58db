package main

import (
	"strings"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
)

// pickDevice opens the device of the trainer's device section
// (devsel.Config.Pick: auto uses a working GPU when there is one) and
// returns the line that says which. A GPU gives memory back (VMM arenas)
// only where the run needs it: ZeRO-2's gradients and sharded masters.
func pickDevice(cfg *Config) (model.Device, string, error) {
	opts := cuda.DefaultOptions()
	opts.VMM = cfg.DP.Stage() == 2 || cfg.DP.ShardMasters
	dev, line, err := cfg.Trainer.Pick(opts)
	if g, ok := dev.(*cuda.Device); ok && err == nil && opts.VMM {
		// Whether the gradients can be given back decides ZeRO-2's memory:
		// say which way it went (the VMM arenas, or why not).
		_, note := g.VMM()
		line = strings.TrimPrefix(line+"\n"+note, "\n")
	}
	return dev, line, err
}

// useMixed switches m's device to bf16 mixed precision with a bf16 compute
// copy of m's weights where the device offers it (CUDA: the policy, whose
// fp32 arena stays the optimizer's master copy, and the frozen reference);
// the CPU device does not, and its path is unchanged. planRun plans
// "bf16-mixed" exactly when this applies.
func useMixed(m *model.Model) {
	if mp, ok := m.Dev.(model.MixedPrecision); ok {
		mp.UseBF16(m.Params)
	}
}
