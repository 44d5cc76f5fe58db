package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
)

// With only data.val_files, eval scores those files' questions, no more
// than data.val_size of them, and says how far it is.
func TestEvalUsesValFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs rollouts")
	}
	files := t.TempDir()
	// Agent-R1's layout: its prompts ask for <tool_call>, the protocol of the
	// warm-started policy and of env.style=agent-r1 (a Search-R1 file is refused).
	if err := synth.Default().Export(files, data.ParquetLayout{Style: data.StyleAgentR1}); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	val := filepath.Join(files, "validation.parquet")
	cfg.Data.ValFiles = []string{val}
	cfg.Data.Corpus = filepath.Join(files, "corpus.jsonl")
	cfg.Data.ValSize = 5
	cfg.Baselines = []string{"agent"}
	cfg.Rollout.Slots = 2
	model := filepath.Join("..", "train", "testdata", "warmstart")
	var out bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "eval.json")
	if err := run(context.Background(), cfg, model, "", jsonPath, "", &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []string{"eval: 5 questions from " + val + "; reward em", "agent: evaluating 5 questions", "agent: 2/5 questions", "agent: 5/5 questions"} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	raw, _ := os.ReadFile(jsonPath)
	var res map[string]agent.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if r := res["agent"]["all"]; r == nil || r.N != 5 {
		t.Fatalf("agent results %+v, want 5 questions", res["agent"])
	}
}

// eval and train score with one reward unless told otherwise: both take
// agent.DefaultEnvConfig, whose reward is train's exact match.
func TestEvalSharesTrainsEnvironment(t *testing.T) {
	if got := defaultConfig().Env; !reflect.DeepEqual(got, agent.DefaultEnvConfig()) || got.Reward != "em" {
		t.Fatalf("eval's default env %+v, want agent.DefaultEnvConfig() with reward em", got)
	}
}

// eval -h shows -base and only the keys eval reads, with its defaults.
func TestEvalHelp(t *testing.T) {
	var b bytes.Buffer
	cfg := defaultConfig()
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.String("base", "", "model folder for the base-tool-call baseline")
	printHelp(&b, fs, &cfg)
	h := b.String()
	for _, want := range []string{"[-base DIR]", "-base string", "[agent, base-tool-call, naive-rag]  any of agent, base-tool-call, naive-rag",
		"data.val_files", "data.val_size                 int       0", "data.on_bad_record", "data.max_skip_fraction        float     0.1",
		"env.retriever_wait"} {
		if !strings.Contains(h, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, unused := range []string{"train_batch_size", "data.train_files", "data.seed ", "Keys, with their defaults"} {
		if strings.Contains(h, unused) {
			t.Errorf("help shows %q", unused)
		}
	}
}

// The base-tool-call baseline of a checkpoint defaults to the run's sft/,
// or, for a run without SFT, to the model folder its config.yaml names.
func TestDefaultBase(t *testing.T) {
	run := t.TempDir()
	actor := filepath.Join(run, "global_step_3", "actor")
	os.MkdirAll(actor, 0o755)
	if got := defaultBase(actor); got != "" {
		t.Fatalf("no sft/, no config: %q", got)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(run, "config.yaml"), []byte("model:\n  path: "+src+"\n  hidden_size: 8\nsft:\n  steps: 0\n"), 0o644)
	if got := defaultBase(actor); got != src {
		t.Fatalf("without SFT: %q, want model.path %q", got, src)
	}
	os.MkdirAll(filepath.Join(run, "sft"), 0o755)
	if got := defaultBase(actor); got != filepath.Join(run, "sft") {
		t.Fatalf("with sft/: %q", got)
	}
}
