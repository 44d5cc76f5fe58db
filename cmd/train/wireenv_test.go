package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/rl/metrics"
)

// userFilesConfig is a one-step run of the warm-start fixture on the
// synthetic world exported in Agent-R1's parquet layout, plus a FlashRAG
// JSONL file (extra.jsonl) whose second record's prompt is longer than
// rollout.max_prompt_tokens and whose third record has no gold answer.
func userFilesConfig(t *testing.T) Config {
	t.Helper()
	files := t.TempDir()
	w := synth.Default()
	if err := w.Export(files, data.ParquetLayout{Style: data.StyleAgentR1}); err != nil {
		t.Fatal(err)
	}
	extra := `{"id": "extra-1", "question": "who wrote the first book?", "golden_answers": ["someone"]}
{"id": "extra-2", "question": "where is the river` + strings.Repeat(" river", 1000) + `?", "golden_answers": ["north"]}
{"id": "extra-3", "question": "what has no answer?", "golden_answers": []}
`
	if err := os.WriteFile(filepath.Join(files, "extra.jsonl"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Model.Path = filepath.Join("testdata", "warmstart")
	c.Data.TrainFiles = []string{filepath.Join(files, "train.parquet"), filepath.Join(files, "extra.jsonl")}
	c.Data.ValFiles = []string{filepath.Join(files, "validation.parquet")}
	c.Data.DataSources = []string{"extra.jsonl=synthetic"}
	c.Data.Corpus = filepath.Join(files, "corpus.jsonl")
	c.Data.TrainBatchSize, c.Data.ValSize = 4, 4
	c.SFT.Steps = 0
	c.RL.Rollout.N, c.RL.Actor.MiniBatchSize = 4, 16
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.TestFreq = 1, 0, 0
	c.Trainer.Logger, c.RL.Rollout.Slots, c.Trainer.DefaultLocalDir = []string{"jsonl"}, 16, t.TempDir()
	return c
}

func runConfig(t *testing.T, c *Config) (string, error) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), c, &out)
	return out.String(), err
}

// TestBadRecordSettingFromConfig: data.on_bad_record and data.data_sources
// reach the loader. By default the answerless record stops the run naming
// the file; with skip it is skipped and the long prompt dropped, both
// printed and counted in data/skipped_records.
func TestBadRecordSettingFromConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	c := userFilesConfig(t)
	if _, err := runConfig(t, &c); err == nil || !strings.Contains(err.Error(), "extra.jsonl") {
		t.Fatalf("error %v, want the bad record of extra.jsonl", err)
	}
	// extra.jsonl's 1 bad record of 3 is over the default share: refused,
	// naming the file, the count and the key.
	c = userFilesConfig(t)
	c.Data.OnBadRecord = "skip"
	if _, err := runConfig(t, &c); err == nil || !strings.Contains(err.Error(), "extra.jsonl: 1 of 3 records are bad") || !strings.Contains(err.Error(), "data.max_skip_fraction 0.1") {
		t.Fatalf("error %v, want extra.jsonl refused under data.max_skip_fraction", err)
	}
	c = userFilesConfig(t)
	c.Data.OnBadRecord, c.Data.MaxSkipFraction = "skip", 0.5
	out, err := runConfig(t, &c)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "data: skipped 1 bad record(s)") || !strings.Contains(out, "extra.jsonl: 1 of 3") {
		t.Errorf("no skip summary naming extra.jsonl:\n%s", out)
	}
	if !strings.Contains(out, "data: 3002 train") {
		t.Errorf("want the synthetic world's 3000 questions and extra.jsonl's 2 good ones:\n%s", out)
	}
	if !strings.Contains(out, "data: skipped 1 of 3002 training prompts longer than rollout.max_prompt_tokens 512") {
		t.Errorf("the long prompt was not dropped and counted:\n%s", out)
	}
	recs, err := metrics.ReadJSONL(filepath.Join(c.Trainer.DefaultLocalDir, "metrics.jsonl"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want 1", len(recs), err)
	}
	if got := recs[0].Data["data/skipped_records"]; got != 2 {
		t.Errorf("data/skipped_records %v, want 2 (the bad record and the long prompt)", got)
	}
	if recs[0].Data["tool/calls"] == 0 || recs[0].Data["tool/errors"] != 0 {
		// The warm start learned the synthetic world's prompt, not these
		// files': its calls may be invalid, but they are counted.
		t.Errorf("tool/calls %v, tool/errors %v: want calls to the local index and no errors", recs[0].Data["tool/calls"], recs[0].Data["tool/errors"])
	}
}

// deadRetrieverConfig is a one-step run of the warm-start fixture on the
// synthetic world (whose prompts it learned to call search on) with the
// retriever at url and no retries.
func deadRetrieverConfig(t *testing.T, url string) Config {
	c := testConfig(t, t.TempDir())
	c.Model.Path = filepath.Join("testdata", "warmstart")
	c.SFT.Steps = 0
	c.Trainer.TotalSteps, c.Trainer.SaveFreq = 1, 0
	c.Env.Retriever, c.Env.RetrieverRetries = url, 0
	return c
}

// TestDeadRetrieverStopsTheRun: with env.retriever_url pointing at a
// retriever that answers the start-up probe and then drops every
// connection, every search fails with a connection error. trainer.
// max_tool_error_rate=0.5 stops the run at step 1 with an error naming the
// kind and the URL; with the default 0 the run goes on, warns, and logs
// tool/errors/connection. (A retriever dead from the start stops the run
// before any work: TestDeadRetrieverFailsAtStart.)
func TestDeadRetrieverStopsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	dead := dyingRetriever(t)
	host := strings.TrimPrefix(dead, "http://")
	c := deadRetrieverConfig(t, dead)
	out, err := runConfig(t, &c)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "warning: step 1:") || !strings.Contains(out, host) {
		t.Errorf("no warning naming the URL:\n%s", out)
	}
	recs, err := metrics.ReadJSONL(filepath.Join(c.Trainer.DefaultLocalDir, "metrics.jsonl"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want 1", len(recs), err)
	}
	if got := recs[0].Data["tool/errors/connection"]; !(got > 0) {
		t.Errorf("tool/errors/connection %v, want > 0 (record %v)", got, recs[0].Data)
	}

	dead = dyingRetriever(t)
	host = strings.TrimPrefix(dead, "http://")
	c = deadRetrieverConfig(t, dead)
	c.Trainer.MaxToolErrorRate = 0.5
	out, err = runConfig(t, &c)
	if err == nil || !strings.Contains(err.Error(), "step 1:") || !strings.Contains(err.Error(), "connection") ||
		!strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), "max_tool_error_rate") {
		t.Fatalf("error %v, want step 1 stopped naming connection, the URL and trainer.max_tool_error_rate\n%s", err, out)
	}
}

// searchR1Env is env.style=search-r1 with Search-R1's settings
// (env.SearchR1Config) and the default run's one passage per search.
func searchR1Env(c *Config) {
	c.Env.Config = env.SearchR1Config()
	c.Env.TopK = 1
}

// TestSearchR1StyleTrains: env.style=search-r1 end to end. A warm start of
// the fixture on the synthetic world's gold trajectories rendered in
// Search-R1's protocol, then GRPO on the world exported in Search-R1's
// parquet layout: the policy's <search> turns end at the stop string and
// run real searches (tool/calls > 0, none failed), and its <answer> turns
// are scored by search-r1-em (env/em and env/format logged, formats seen).
// The same files under env.style=agent-r1 are refused at load, naming the
// files and the setting.
func TestSearchR1StyleTrains(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	files := t.TempDir()
	if err := synth.Default().Export(files, data.ParquetLayout{Style: data.StyleSearchR1}); err != nil {
		t.Fatal(err)
	}
	warm := t.TempDir()
	c := testConfig(t, warm)
	c.Model.Path = filepath.Join("testdata", "warmstart")
	searchR1Env(&c)
	c.SFT.Steps, c.SFT.BatchSize, c.SFT.EarlyAnswer = 20, 4, 0
	c.Data.SynthEval, c.Data.ValSize = 4, 4
	c.Trainer.TotalSteps, c.Trainer.SaveFreq = 0, 0
	out, err := runConfig(t, &c)
	if err != nil {
		t.Fatalf("warm start: %v\n%s", err, out)
	}

	c = userFilesConfig(t)
	c.Model.Path = filepath.Join(warm, "sft")
	c.Data.TrainFiles, c.Data.DataSources = []string{filepath.Join(files, "train.parquet")}, nil
	c.Data.ValFiles = []string{filepath.Join(files, "validation.parquet")}
	c.Data.Corpus = filepath.Join(files, "corpus.jsonl")
	bad := c
	bad.Trainer.DefaultLocalDir = t.TempDir()
	if _, err := runConfig(t, &bad); err == nil || !strings.Contains(err.Error(), "train.parquet") || !strings.Contains(err.Error(), "env.style=search-r1") {
		t.Errorf("Search-R1 prompts under env.style=agent-r1: error %v, want a refusal naming the file and env.style=search-r1", err)
	}
	searchR1Env(&c)
	out, err = runConfig(t, &c)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs, err := metrics.ReadJSONL(filepath.Join(c.Trainer.DefaultLocalDir, "metrics.jsonl"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want 1", len(recs), err)
	}
	m := recs[0].Data
	t.Logf("tool/calls %v, tool/invalid %v, tool/errors %v, env/format %v, env/em %v, critic/score/mean %v",
		m["tool/calls"], m["tool/invalid"], m["tool/errors"], m["env/format"], m["env/em"], m["critic/score/mean"])
	if !(m["tool/calls"]-m["tool/invalid"] > 0) || m["tool/errors"] != 0 {
		t.Errorf("tool/calls %v, tool/invalid %v, tool/errors %v: want searches run without error", m["tool/calls"], m["tool/invalid"], m["tool/errors"])
	}
	if _, ok := m["env/em"]; !ok || !(m["env/format"] > 0) {
		t.Errorf("env/em %v, env/format %v: want answers extracted and scored", m["env/em"], m["env/format"])
	}
}

// TestEvidenceRewardNeedsChains: the evidence process reward reads each
// question's evidence chain, which a user's files do not carry; the run is
// refused at load, naming the key and a question, before the warm start.
func TestEvidenceRewardNeedsChains(t *testing.T) {
	c := userFilesConfig(t)
	c.Data.OnBadRecord, c.Data.MaxSkipFraction = "skip", 0.5
	c.Env.Process = env.ProcessConfig{Name: "evidence", Useful: 0.1}
	c.RL.Algorithm.ProcessReward = true
	out, err := runConfig(t, &c)
	if err == nil || !strings.Contains(err.Error(), "env.process.name=evidence") || !strings.Contains(err.Error(), `question "`) {
		t.Fatalf("error %v, want the evidence reward refused naming a question", err)
	}
	if strings.Contains(out, "sft step") || strings.Contains(out, "step 1") {
		t.Errorf("ran before the error:\n%s", out)
	}
}
