package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/rl"
)

// helpData is the part of the data section eval reads: the training-only
// keys of agent.DataConfig (train_files, train_batch_size, seed) are left
// out of eval -h, though a config file may still hold them. The loading
// keys (data.Settings: on_bad_record, max_skip_fraction, ...) shape how
// the val_files are read.
type helpData struct {
	ValFiles      []string `yaml:"val_files" help:"question sets to evaluate (JSON, JSONL, parquet); empty: the synthetic world"`
	data.Settings `yaml:",inline"`
	Corpus        string    `yaml:"corpus" help:"retrieval corpus JSONL (wiki-18 or KILT); empty: the synthetic world's"`
	ValSize       int       `yaml:"val_size" help:"questions evaluated, the first N (0: all)"`
	SynthSeed     uint64    `yaml:"synth_seed" help:"synthetic world seed (the train run's)"`
	SynthTrain    int       `yaml:"synth_train" help:"synthetic training questions (the world depends on it)"`
	SynthEval     int       `yaml:"synth_eval" help:"synthetic validation and test questions, each"`
	SynthHops     []float64 `yaml:"synth_hop_weights" help:"shares of 2-, 3- and 4-hop synthetic questions"`
}

type helpConfig struct {
	Data       helpData         `yaml:"data"`
	Env        agent.EnvConfig  `yaml:"env"`
	Rollout    rl.RolloutConfig `yaml:"rollout"`
	Split      string           `yaml:"split" help:"synthetic world split: test or validation"`
	Baselines  []string         `yaml:"baselines" help:"any of agent, base-tool-call, naive-rag"`
	MaxContext int              `yaml:"max_context" help:"tokens per trajectory"`
	Device     devsel.Config    `yaml:",inline"`
}

// printHelp is eval -h: usage, the flags, and the keys eval uses with the
// defaults it runs with.
func printHelp(w io.Writer, fs *flag.FlagSet, cfg *Config) {
	fmt.Fprintln(w, "usage: eval -model DIR [-base DIR] [-output FILE.json] [-config FILE.yaml] [key=value ...]")
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w)
	d := cfg.Data
	h := helpConfig{Data: helpData{ValFiles: d.ValFiles, Settings: d.Settings, Corpus: d.Corpus, ValSize: d.ValSize, SynthSeed: d.SynthSeed,
		SynthTrain: d.SynthTrain, SynthEval: d.SynthEval, SynthHops: d.SynthHops},
		Env: cfg.Env, Rollout: cfg.Rollout, Split: cfg.Split, Baselines: cfg.Baselines, MaxContext: cfg.MaxContext, Device: cfg.Device}
	config.Help(w, &h)
}
