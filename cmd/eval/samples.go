package main

import (
	"fmt"
	"strings"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
)

// evalSamples picks the questions: the files of data.val_files when given
// (agent.Build loads them and cuts them to data.val_size), else the
// synthetic world's split, cut to data.val_size as well.
func evalSamples(cfg Config, s *agent.Setup) []data.Sample {
	samples := s.Val
	if s.World != nil && cfg.Split == "test" {
		samples = s.Test
	}
	if n := cfg.Data.ValSize; n > 0 && len(samples) > n {
		samples = samples[:n]
	}
	return samples
}

// sourceName says where the questions come from.
func sourceName(cfg Config) string {
	if len(cfg.Data.ValFiles) > 0 {
		return strings.Join(cfg.Data.ValFiles, ", ")
	}
	return fmt.Sprintf("the synthetic world's %s split (data.synth_seed %d)", cfg.Split, cfg.Data.SynthSeed)
}

// progressChunk is how many questions are evaluated between progress
// lines: a tenth of the set, but at least one batch of slots so that the
// KV cache is used fully.
func progressChunk(cfg Config, n int) int {
	return max(cfg.Slots, (n+9)/10)
}
