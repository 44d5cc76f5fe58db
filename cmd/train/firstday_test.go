package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/metrics"
)

// copyWarmstart copies the warm-start fixture into a temporary folder with
// a generation_config.json of Qwen2.5-Instruct's kind: sampling defaults
// and a key r1go does not know.
func copyWarmstart(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "warmstart")
	dst := filepath.Join(t.TempDir(), "Qwen-like")
	os.MkdirAll(dst, 0o755)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "generation_config.json" {
			raw = []byte(`{"bos_token_id": null, "do_sample": true, "eos_token_id": [2050, 2048], "pad_token_id": 2048,` +
				` "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "transformers_version": "4.37.0", "custom_key": "kept"}`)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func jsonMap(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCheckpointsLikeVerl trains a Hugging Face folder without SFT for
// three steps, saving each, keeping two: no sft/ copy, the source
// generation_config.json kept, the optimizer only in the newest
// checkpoint, folders 0755, each step's rollouts dumped, the tiny-only
// defaults warned about, and (with the threshold at 0) each phase of each
// step announced as it ends.
func TestCheckpointsLikeVerl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	src := copyWarmstart(t)
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.Model.Path = src
	c.SFT.Steps = 0
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.TestFreq = 3, 1, 3
	c.Trainer.MaxActorCkptToKeep = 2
	c.Trainer.LogValGenerations = 3
	var out bytes.Buffer
	defer func(d time.Duration) { slowPhase = d }(slowPhase)
	slowPhase = 0 // every phase of every step is printed
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []string{"step 1: gen done in", "step 1: adv done in", "step 1: update_actor done in", "step 3: update_actor done in"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks the phase line %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sft")); err == nil {
		t.Error("sft/ was written although sft.steps=0")
	}
	if _, err := os.Stat(filepath.Join(dir, "initial_eval.json")); err != nil {
		t.Error("no initial_eval.json:", err)
	}
	if strings.Contains(log, "after SFT") || !strings.Contains(log, "before RL: held-out EM") {
		t.Errorf("the log labels the initial policy wrongly:\n%s", log)
	}
	steps, _ := checkpointSteps(dir)
	if !slices.Equal(steps, []int{2, 3}) {
		t.Fatalf("checkpoints %v, want [2 3] (max_actor_ckpt_to_keep=2)", steps)
	}
	for n, want := range map[int]bool{2: false, 3: true} {
		_, err := os.Stat(filepath.Join(dir, "global_step_"+itoa(n), "actor_optim.safetensors"))
		if (err == nil) != want {
			t.Errorf("global_step_%d has optimizer state: %v, want %v", n, err == nil, want)
		}
	}
	actor := filepath.Join(dir, "global_step_3", "actor")
	if got, want := jsonMap(t, filepath.Join(actor, "generation_config.json")), jsonMap(t, filepath.Join(src, "generation_config.json")); !reflect.DeepEqual(got, want) {
		t.Errorf("generation_config.json\n got %v\nwant %v", got, want)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			if st, _ := d.Info(); st.Mode().Perm() != 0o755 {
				t.Errorf("%s has mode %v, want 0755", p, st.Mode().Perm())
			}
		}
		return nil
	})
	for _, name := range []string{"step_1.jsonl", "step_2.jsonl", "step_3.jsonl", "val_step_3.jsonl"} {
		recs, err := rl.ReadDump(filepath.Join(dir, "rollouts", name))
		if err != nil {
			t.Fatal(err)
		}
		want := c.Data.TrainBatchSize * c.RL.Rollout.N
		if strings.HasPrefix(name, "val") {
			want = 3
		}
		if len(recs) != want {
			t.Errorf("%s: %d records, want %d", name, len(recs), want)
		}
		if !strings.HasPrefix(name, "val") && recs[0].Advantage == nil {
			t.Errorf("%s: training record without advantage", name)
		}
	}
	for _, want := range []string{"warning: model.path is set but", "actor.optim.lr=0.0002", "env.topk=1", "rollout.max_turn_tokens=64",
		"checkpoint: saving " + filepath.Join(dir, "global_step_3"), "checkpoint: saved global_step_3", "removed 1 older",
		"held-out before RL: evaluating", "held-out after RL: 16/16 questions", "evaluate: go run ./cmd/eval -model " + actor + " data.synth_train=300 data.synth_eval=16"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The summary's evaluate line carries the data and environment keys the
// run used, so that eval scores the same questions the same way.
func TestEvalCommandCarriesDataKeys(t *testing.T) {
	c := DefaultConfig()
	c.Data.TrainFiles = []string{"train.parquet"}
	c.Data.ValFiles = []string{"hotpotqa.parquet", "musique.jsonl"}
	c.Data.Corpus, c.Data.ValSize = "wiki18.jsonl", 500
	c.Env.TopK, c.Env.Reward, c.Env.Instruction = 3, "f1", "Answer briefly."
	c.Model.MaxContext = 8192
	got := evalCommand(&c, "RUN/global_step_9/actor")
	want := "go run ./cmd/eval -model RUN/global_step_9/actor data.val_files=[hotpotqa.parquet,musique.jsonl] data.val_size=500 " +
		"data.corpus=wiki18.jsonl env.topk=3 env.reward=f1 env.instruction='Answer briefly.' max_context=8192"
	if got != want {
		t.Fatalf("evaluate line\n got %s\nwant %s", got, want)
	}
	c.RL.Rollout.Trajectory, c.Env.Context.Policy, c.Env.Context.Turns = "step", "window", 1
	if got := evalCommand(&c, "R"); !strings.HasSuffix(got, " rollout.trajectory=step env.context=window env.context_turns=1") {
		t.Errorf("step mode's evaluate line %s lacks its context keys", got)
	}
	if def := DefaultConfig(); def.Env.Reward != agent.DefaultEnvConfig().Reward {
		t.Fatalf("train's default reward %q differs from eval's %q", def.Env.Reward, agent.DefaultEnvConfig().Reward)
	}
}

// train -h prints its header once, then the key table with the guard keys.
func TestHelpHeaderOnce(t *testing.T) {
	var b bytes.Buffer
	c := DefaultConfig()
	printHelp(&b, &c)
	h := b.String()
	if n := strings.Count(h, "usage: train"); n != 1 || strings.Contains(h, "Keys, with their defaults") || strings.Count(h, "Config keys and defaults") != 1 {
		t.Fatalf("help header:\n%s", h[:min(len(h), 600)])
	}
	for _, k := range []string{"trainer.overwrite", "trainer.max_actor_ckpt_to_keep", "trainer.rollout_data_dir", "trainer.log_val_generations",
		"trainer.entropy_collapse_threshold", "trainer.entropy_collapse_steps"} {
		if !strings.Contains(h, k) {
			t.Errorf("help lacks %s", k)
		}
	}
}

// The plot names what it draws and has a validation legend only with
// validation points.
func TestTrainingChartLegend(t *testing.T) {
	c := DefaultConfig()
	pts := []metrics.Point{{Step: 1, Value: 0.5}}
	ch := trainingChart(&c, map[string][]metrics.Point{"critic/score/mean": pts, "env/em": pts})
	if len(ch.Series) != 2 || strings.Contains(ch.Title, "validation") || !strings.Contains(ch.Title, "per RL step") {
		t.Fatalf("chart without validation: title %q, series %v", ch.Title, slices.Sorted(maps.Keys(ch.Series)))
	}
	if _, ok := ch.Series["train reward (critic/score/mean, env.em)"]; !ok {
		t.Errorf("the reward legend does not name the reward: %v", slices.Sorted(maps.Keys(ch.Series)))
	}
	ch = trainingChart(&c, map[string][]metrics.Point{"critic/score/mean": pts, "env/em": pts, "val-core/all/em": pts})
	if len(ch.Series) != 3 || !strings.Contains(ch.Title, "validation EM") {
		t.Fatalf("chart with validation: title %q, %d series", ch.Title, len(ch.Series))
	}
}

// A run that crashed after logging step 3 but before checkpointing it
// (here: stopped after the step-2 checkpoint, with step 3's record
// appended as the crash would have left it) logs step 3 again when
// resumed; metrics.jsonl is cut back first, so each step appears once.
func TestResumeCutsMetricsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer twice")
	}
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.Model.Path, c.SFT.Steps = filepath.Join("testdata", "warmstart"), 0
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.StopAfter = 3, 2, 2
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	path := filepath.Join(dir, "metrics.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":3,"data":{"critic/score/mean":-7}}` + "\n")
	f.Close()
	c.Trainer.StopAfter, c.Trainer.Resume = 0, true
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "resume: dropped 1 metrics.jsonl records after step 2") {
		t.Errorf("no note of the cut:\n%s", out.String())
	}
	recs, err := metrics.ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	if !slices.Equal(steps, []int{1, 2, 3}) || recs[2].Data["critic/score/mean"] == -7 {
		t.Fatalf("metrics.jsonl steps %v (step 3: %v), want [1 2 3] with the resumed step 3", steps, recs[len(recs)-1].Data["critic/score/mean"])
	}
}
