package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/rl"
)

// TestEvalRunsEveryBaseline saves a small untrained model with a tokenizer
// trained on the synthetic world and evaluates it: every baseline reports
// every question, naive RAG makes no tool call, and the JSON output holds
// the same numbers as the table.
func TestEvalRunsEveryBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tokenizer")
	}
	ctx := context.Background()
	work := t.TempDir()
	cfg := defaultConfig()
	cfg.Data.SynthTrain, cfg.Data.SynthEval = 50, 6
	cfg.Rollout.MaxTurnTokens, cfg.Rollout.MaxResponseTokens = 12, 120
	mc := agent.ModelConfig{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 64, TokenizerVocab: 400, Seed: 1, MaxContext: cfg.MaxContext}
	s, err := agent.Build(ctx, mc, cfg.Data, cfg.Env, cpu.New(), filepath.Join(work, "build"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "run", "global_step_1", "actor")
	if err := s.Policy.Save(dir, nil, model.SaveOptions{DType: "float32", TokenizerDir: s.TokenizerDir}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	jsonPath, trajDir := filepath.Join(work, "eval.json"), filepath.Join(work, "trajectories")
	if err := run(ctx, cfg, dir, dir, jsonPath, trajDir, &out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]agent.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"agent", "base-tool-call", "naive-rag"} {
		r, ok := res[b]
		if !ok || r["all"] == nil || r["all"].N != 6 {
			t.Fatalf("%s: results %+v, want 6 questions", b, r)
		}
		if !strings.Contains(out.String(), b) {
			t.Errorf("table lacks %s:\n%s", b, out.String())
		}
	}
	if c := res["naive-rag"]["all"].ToolCalls; c != 0 {
		t.Errorf("naive RAG made %.2f tool calls per question, want 0", c)
	}
	// The trajectories of the tool-using baselines, one per question, agree
	// with the results: their EM is the table's, their calls its calls.
	for _, b := range []string{"agent", "base-tool-call"} {
		recs, err := rl.ReadDump(filepath.Join(trajDir, b+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 6 {
			t.Fatalf("%s: %d trajectories for 6 questions", b, len(recs))
		}
		var em, calls float64
		for _, r := range recs {
			if _, ok := r.Metrics["em"]; r.Question == "" || len(r.Answers) == 0 || r.Text == "" || !ok {
				t.Fatalf("%s: trajectory without its question, answers, text or EM: %+v", b, r)
			}
			em += r.Metrics["em"] / 6
			calls += float64(r.NumToolCalls) / 6
		}
		if all := res[b]["all"]; math.Abs(em-all.EM) > 1e-9 || math.Abs(calls-all.ToolCalls) > 1e-9 {
			t.Errorf("%s: trajectories give EM %v and %v calls, the results %v and %v", b, em, calls, all.EM, all.ToolCalls)
		}
	}
	if _, err := os.Stat(filepath.Join(trajDir, "naive-rag.jsonl")); !os.IsNotExist(err) {
		t.Errorf("naive RAG wrote trajectories (%v): it has no tool-using loop to dump", err)
	}
	if err := run(ctx, cfg, filepath.Join(work, "missing"), "", "", "", &out); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing model folder: %v", err)
	}
}

// TestEvalDryRun plans an evaluation of a config-only Qwen2.5-7B folder on
// an absent GPU: the plan holds the policy, the base model and the KV
// cache, says whether it fits, and the command opens nothing.
func TestEvalDryRun(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen2.5-7b.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	cfg := defaultConfig()
	cfg.Device = devsel.Config{Device: "cuda", DeviceMemory: "80GiB", DryRun: true}
	cfg.Rollout.Slots, cfg.MaxContext = 256, 4096
	var out strings.Builder
	if err := run(context.Background(), cfg, dir, dir, "", "", &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"memory plan: qwen2, 28 layers", "on cuda", "base model", "KV cache", "256 slots × 4096 positions", "dry run: the plan"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan lacks %q:\n%s", s, out.String())
		}
	}
	// Fewer questions than slots: the plan holds a slot per question; on the
	// CPU a bf16 folder is planned frozen in bf16, without gradients.
	cfg.Data.ValSize = 8
	cfg.Device = devsel.Config{Device: "cpu", DeviceMemory: "64GiB", DryRun: true}
	out.Reset()
	if err := run(context.Background(), cfg, dir, dir, "", "", &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"8 slots × 4096 positions", "× 2 B, frozen, bf16 as in the folder", "none: the model is loaded frozen"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan lacks %q:\n%s", s, out.String())
		}
	}
}

// TestDeadRetrieverFailsAtStart: env.retriever_url at a port where nothing
// listens stops eval before it loads a model, naming the URL and what came
// back.
func TestDeadRetrieverFailsAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	cfg := defaultConfig()
	cfg.Env.Retriever = dead
	cfg.Data.ValSize, cfg.Baselines, cfg.Rollout.Slots = 2, []string{"agent"}, 2
	var out bytes.Buffer
	err = run(context.Background(), cfg, filepath.Join("..", "train", "testdata", "warmstart"), "", "", "", &out)
	if err == nil || !strings.Contains(err.Error(), dead+"/retrieve") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want the dead retriever named\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "eval:") {
		t.Errorf("eval started before the probe:\n%s", out.String())
	}
}

// TestEvalRefusesWhatItCannotRun: the rollout and device sections are
// train's, and eval says which of their settings it cannot honour before
// any work.
func TestEvalRefusesWhatItCannotRun(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Rollout.Mode = "external" }, "rollout.mode"},
		{func(c *Config) { c.Rollout.DType = "bfloat16" }, "rollout.dtype"},
		{func(c *Config) { c.Rollout.Slots = 0 }, "slots 0"},
		{func(c *Config) { c.Device.Device = "tpu" }, `device "tpu"`},
		{func(c *Config) { c.Device.DeviceMemory = "lots" }, "device_memory"},
	} {
		cfg := defaultConfig()
		c.set(&cfg)
		err := run(context.Background(), cfg, t.TempDir(), "", "", "", io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one naming %q", err, c.want)
		}
	}
}
