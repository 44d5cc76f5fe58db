package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

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
	return max(cfg.Rollout.Slots, (n+9)/10)
}

// defaultBase finds the policy before RL of a train checkpoint
// (RUN/global_step_N/actor): the run's warm-started RUN/sft, or, for a run
// without SFT, the model folder its RUN/config.yaml started from. "" when
// neither is known.
func defaultBase(modelDir string) string {
	run := filepath.Dir(filepath.Dir(filepath.Clean(modelDir)))
	if sft := filepath.Join(run, "sft"); isDir(sft) {
		return sft
	}
	raw, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		return ""
	}
	var c struct {
		Model struct {
			Path string `yaml:"path"`
		} `yaml:"model"`
	}
	if yaml.Unmarshal(raw, &c) != nil || c.Model.Path == "" || !isDir(c.Model.Path) {
		return ""
	}
	return c.Model.Path
}
