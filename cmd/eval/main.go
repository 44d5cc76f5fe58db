// Command eval scores a model folder on question-answering sets with the
// search tool, and beside it the paper's two baselines:
//
//	go run ./cmd/eval -model runs/r1go/synthetic-grpo/global_step_60/actor
//	go run ./cmd/eval -model DIR data.val_files=[hotpotqa.parquet,musique.jsonl] data.corpus=wiki18.jsonl
//
// For each data source it reports exact match, F1, cover EM, turns and tool
// calls of:
//
//   - agent: the model with the tool, greedy, as trained (multi-turn);
//   - base-tool-call: the same loop for the model before RL: -base DIR, or,
//     for a checkpoint of a train run (RUN/global_step_N/actor), the run's
//     warm-started policy RUN/sft, or without SFT the model.path of its
//     RUN/config.yaml;
//   - naive-rag: one retrieval with the question itself, the passages put
//     in the prompt, and one answer turn without tools.
//
// With no data.* keys it evaluates on the synthetic world's test split
// (the world and seed of the embedded default run). Results go to stdout
// as a table and to -output as JSON; -trajectories DIR writes every
// question's trajectory of the agent and base-tool-call baselines to
// DIR/agent.jsonl and DIR/base-tool-call.jsonl, in the train command's
// rollout dump format (cmd/rollouts reads and verifies it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/cmd/internal/weights"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// Config is the evaluation's configuration; data, env and rollout keys are
// those of the train command (the rollout's defaults are one greedy sample
// per question, agent.DefaultEvalRollout).
type Config struct {
	Data       agent.DataConfig `yaml:"data"`
	Env        agent.EnvConfig  `yaml:"env"`
	Rollout    rl.RolloutConfig `yaml:"rollout"`
	Split      string           `yaml:"split" help:"synthetic world split: test or validation"`
	Baselines  []string         `yaml:"baselines" help:"any of agent, base-tool-call, naive-rag"`
	MaxContext int              `yaml:"max_context" help:"tokens per trajectory"`
	Device     devsel.Config    `yaml:",inline"`
}

// Validate checks the device section and what eval's rollout cannot do:
// it drives the environment itself (mode builtin) and decodes with the
// model as loaded (no bf16 rollout copy). The rollout section checks its
// own ranges.
func (c *Config) Validate() error {
	if err := c.Device.Validate(); err != nil {
		return err
	}
	if c.Rollout.Mode != "" && c.Rollout.Mode != "builtin" {
		return fmt.Errorf("rollout.mode %q: eval runs the builtin rollout", c.Rollout.Mode)
	}
	if c.Rollout.DType != "" && c.Rollout.DType != "float32" {
		return fmt.Errorf("rollout.dtype %q: eval decodes with the model as loaded", c.Rollout.DType)
	}
	if c.MaxContext < 2 {
		return fmt.Errorf("max_context %d must be ≥ 2", c.MaxContext)
	}
	return nil
}

func defaultConfig() Config {
	c := Config{
		Data:    agent.DefaultDataConfig(),
		Env:     agent.DefaultEnvConfig(),
		Rollout: agent.DefaultEvalRollout(),
		Split:   "test", Baselines: []string{"agent", "base-tool-call", "naive-rag"}, MaxContext: 1280,
		Device: devsel.Default(),
	}
	// eval scores a whole set unless told otherwise; train's 50 is the
	// size of its periodic validation.
	c.Data.ValSize = 0
	return c
}

func main() {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.Usage = func() {}
	modelDir := fs.String("model", "", "Hugging Face model folder to evaluate (required)")
	output := fs.String("output", "", "write the results as JSON here")
	base := fs.String("base", "", "model folder for the base-tool-call baseline (default: the run's sft/ folder)")
	trajDir := fs.String("trajectories", "", "write each tool-using baseline's trajectories to DIR/BASELINE.jsonl (the rollout dump format)")
	switch err := config.Load(&cfg, os.Args[1:], fs); {
	case errors.Is(err, config.ErrHelp):
		printHelp(os.Stdout, fs, &cfg)
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *modelDir == "" {
		fmt.Fprintln(os.Stderr, "eval: -model is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *base == "" {
		*base = defaultBase(*modelDir)
	}
	if err := run(ctx, cfg, *modelDir, *base, *output, *trajDir, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func run(ctx context.Context, cfg Config, modelDir, baseDir, output, trajDir string, out io.Writer) error {
	// A config built in Go is checked as a loaded one is.
	if err := cfg.Rollout.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// A dead retriever is found before the device and the model.
	if err := cfg.Env.ProbeRetriever(ctx, func(s string) { fmt.Fprintln(out, s) }); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "r1go-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	mc := agent.ModelConfig{Path: modelDir, MaxContext: cfg.MaxContext, Frozen: true}
	dev, stop, err := openDevice(cfg, baseDir != "" && slices.Contains(cfg.Baselines, "base-tool-call"), modelDir, out)
	if stop || err != nil {
		return err
	}
	// After the plan: a dry run needs config.json alone.
	if err := weights.CheckFinite(modelDir); err != nil {
		return err
	}
	s, err := agent.Build(ctx, mc, cfg.Data, cfg.Env, dev, work)
	if err != nil {
		return err
	}
	defer s.Close()
	samples := evalSamples(cfg, s)
	if len(samples) == 0 {
		return fmt.Errorf("no questions to evaluate (data.val_files %v)", cfg.Data.ValFiles)
	}
	fmt.Fprintf(out, "eval: %d questions from %s; reward %s\n", len(samples), sourceName(cfg), cfg.Env.Reward)
	ec := agent.EvalConfig{Rollout: cfg.Rollout, MaxContext: cfg.MaxContext}
	all := map[string]agent.Results{}
	for _, b := range cfg.Baselines {
		var (
			r     agent.Results
			trajs []*rl.Trajectory
		)
		switch b {
		case "agent":
			r, trajs, err = agent.EvaluateProgress(ctx, s, s.Policy, samples, ec, progressChunk(cfg, len(samples)), out, b)
		case "base-tool-call":
			if baseDir == "" {
				fmt.Fprintln(out, "base-tool-call: skipped (no -base folder, and neither sft/ nor config.yaml's model.path in the checkpoint's run folder)")
				continue
			}
			var bm *model.Model
			if err := weights.CheckFinite(baseDir); err != nil {
				return err
			}
			if bm, err = model.LoadWith(baseDir, s.Policy.Dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "auto"}); err != nil {
				return err
			}
			r, trajs, err = agent.EvaluateProgress(ctx, s, bm, samples, ec, progressChunk(cfg, len(samples)), out, b)
		case "naive-rag":
			fmt.Fprintf(out, "%s: evaluating %d questions (one retrieval, one answer turn)\n", b, len(samples))
			r, err = agent.NaiveRAG(ctx, s, s.Policy, samples, ec)
		default:
			return fmt.Errorf("baselines: unknown %q (want agent, base-tool-call or naive-rag)", b)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		all[b] = r
		if trajDir != "" && trajs != nil {
			if err := os.MkdirAll(trajDir, 0o755); err != nil {
				return err
			}
			path := filepath.Join(trajDir, b+".jsonl")
			if err := rl.WriteDump(path, rl.DumpRecords(0, trajs, nil, s.Tok)); err != nil {
				return fmt.Errorf("%s: trajectories: %w", b, err)
			}
			fmt.Fprintf(out, "%s: %d trajectories written to %s\n", b, len(trajs), path)
		}
	}
	fmt.Fprintf(out, "model %s, %d questions\n", filepath.Clean(modelDir), len(samples))
	fmt.Fprintf(out, "%-16s %-18s %6s %6s %6s %8s %6s %6s\n", "method", "source", "n", "EM", "F1", "cover EM", "turns", "calls")
	for _, b := range cfg.Baselines {
		r, ok := all[b]
		if !ok {
			continue
		}
		for _, src := range r.Sources() {
			x := r[src]
			fmt.Fprintf(out, "%-16s %-18s %6d %6.3f %6.3f %8.3f %6.2f %6.2f\n", b, src, x.N, x.EM, x.F1, x.CoverEM, x.Turns, x.ToolCalls)
		}
	}
	if output != "" {
		raw, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(output, append(raw, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
