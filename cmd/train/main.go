// Command train trains a tool-using agent with reinforcement learning.
//
//	go run ./cmd/train                       # the embedded default on the CPU
//	go run ./cmd/train -config run.yaml actor.optim.lr=1e-6 rollout.n=5
//	go run ./cmd/train --help                # every key with its default
//
// With no arguments it builds the synthetic multi-hop world, trains a
// tokenizer on its corpus, makes a tiny Qwen2-architecture model, warm-starts
// it on a hasty teacher's tool-use trajectories (SFT: they answer early,
// and so does the warm-started policy), then trains it with GRPO and the
// BM25 search tool, and reports held-out exact match after SFT, after RL,
// and the gain. Given model.path (a Hugging Face folder), data.train_files,
// data.val_files and data.corpus (or env.retriever_url), the same command
// trains a real Qwen2.5 agent.
//
// The run folder (trainer.default_local_dir, default runs/{project}/{experiment})
// holds the resolved config, metrics.jsonl, TensorBoard events, the
// checkpoints global_step_N/ (the policy as a Hugging Face folder, the
// optimizer state and the trainer state) and a plot of score and validation
// EM; trainer.resume=true continues from its latest checkpoint exactly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"

	"github.com/r1go/r1go/cmd/internal/config"
)

func main() {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.Usage = func() {}
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	switch err := config.Load(&cfg, os.Args[1:], fs); {
	case errors.Is(err, config.ErrHelp):
		printHelp(os.Stdout, &cfg)
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "train:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, &cfg, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}
