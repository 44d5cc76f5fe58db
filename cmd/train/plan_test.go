package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/config"
)

// TestDryRunConfigOnly plans GPU runs for folders that hold nothing but the
// real config.json of Qwen2.5-0.5B, 3B and 7B and Qwen3-4B, on a machine
// without a GPU: the plan prints in bf16 mixed precision (what run turns on
// for a CUDA device) with its verdict, the command exits
// without error either way, and no run folder is written.
func TestDryRunConfigOnly(t *testing.T) {
	for _, want := range []struct {
		name, params, slots string
		fits                bool
	}{
		{"config_qwen2.5-0.5b.json", "494032768 parameters", "160", true},
		{"config_qwen2.5-0.5b.json", "494032768 parameters", "640", true}, // bf16 KV cache: 30 GiB
		{"config_qwen2.5-3b.json", "3085938688 parameters", "640", false},
		{"config_qwen2.5-7b.json", "7615616512 parameters", "640", false},
		{"config_qwen3-4b.json", "4022468096 parameters", "640", false},
	} {
		name := want.name
		dir := t.TempDir()
		raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		runDir := filepath.Join(dir, "run")
		cfg := DefaultConfig()
		if err := config.Load(&cfg, []string{"model.path=" + dir, "trainer.dry_run=true", "trainer.device=cuda",
			"trainer.device_memory=80GiB", "model.max_context=4096", "trainer.default_local_dir=" + runDir,
			"actor.use_kl_loss=true", "data.train_batch_size=128", "rollout.n=5", "rollout.slots=" + want.slots}, nil); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), &cfg, &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := out.String()
		for _, s := range []string{"memory plan:", "on cuda (bf16-mixed)", want.params, "KV cache", "reference policy", "of 80.000 GiB"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: output lacks %q:\n%s", name, s, text)
			}
		}
		verdict := "dry run: the plan fits"
		if !want.fits {
			verdict = "dry run: the plan does NOT fit"
		}
		if !strings.Contains(text, verdict) {
			t.Errorf("%s: want %q:\n%s", name, verdict, text)
		}
		if !want.fits && !strings.Contains(text, "to fit, set") && !strings.Contains(text, "use a larger device") {
			t.Errorf("%s: no advice:\n%s", name, text)
		}
		if _, err := os.Stat(runDir); !os.IsNotExist(err) {
			t.Errorf("%s: the dry run wrote its run folder (%v)", name, err)
		}
	}
}

// TestPlanStopsBeforeWork gives the test run too little device memory: it
// must stop after printing the plan, before building data or a model, with
// an error naming the largest items; with 2 MiB nothing fits, with 60 MiB
// the advice names keys that, set, make the plan fit.
func TestPlanStopsBeforeWork(t *testing.T) {
	for _, mem := range []string{"2MiB", "60MiB"} {
		planStops(t, mem)
	}
}

func planStops(t *testing.T, mem string) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Trainer.Device, cfg.Trainer.DeviceMemory = "cpu", mem
	var out bytes.Buffer
	err := run(context.Background(), &cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "largest:") || !strings.Contains(err.Error(), "plan: the run needs") {
		t.Fatalf("error %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "does NOT fit") || !strings.Contains(out.String(), "on cpu (fp32)") {
		t.Errorf("plan not printed, or not as an fp32 CPU plan:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("the run built its data before stopping (%v)", err)
	}
	// Advice, when given, names real keys that make the plan fit.
	i := strings.Index(err.Error(), "to fit, set ")
	if (i >= 0) != (mem != "2MiB") {
		t.Fatalf("%s: advice given: %v: %v", mem, i >= 0, err)
	}
	if i >= 0 {
		args := strings.Fields(strings.SplitN(err.Error()[i+len("to fit, set "):], "; or ", 2)[0])
		cfg2 := testConfig(t, t.TempDir())
		if err := config.Load(&cfg2, append(args, "trainer.device=cpu", "trainer.device_memory="+mem, "trainer.dry_run=true"), nil); err != nil {
			t.Fatalf("advice %v: %v", args, err)
		}
		cfg2.Data, cfg2.Model, cfg2.RL.Rollout.N = cfg.Data, cfg.Model, cfg.RL.Rollout.N
		out.Reset()
		if err := run(context.Background(), &cfg2, &out); err != nil || !strings.Contains(out.String(), "dry run: the plan fits") {
			t.Errorf("advice %v does not fit: %v\n%s", args, err, out.String())
		}
	}
}

// TestDryRunPlansLoRA: a LoRA run's plan holds the adapters, their AdamW
// state and no gradient arena for the base, and its reference is the base
// itself (no second copy of the weights); bf16 AdamW moments halve the
// optimizer state.
func TestDryRunPlansLoRA(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen2.5-3b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if err := config.Load(&cfg, []string{"model.path=" + dir, "trainer.dry_run=true", "trainer.device=cpu",
		"trainer.device_memory=64GiB", "model.max_context=2048", "actor.use_kl_loss=true",
		"actor.lora.rank=16", "actor.lora.alpha=32", "actor.lora.target_modules=[all-linear]"}, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), &cfg, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, s := range []string{"on cpu (fp32)", "LoRA adapters", "rank 16", "none: the base is frozen under LoRA adapters",
		"the frozen base itself", "AdamW first and second moments of the adapters"} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
}

// TestDryRunZeroOne plans Qwen2.5-7B for rank 0 of 8 (torchrun's
// variables) on 80 GB cards with and without dp.zero1: the plan is per
// rank, says ZeRO-1, and its optimizer line shrinks to the shard.
func TestDryRunZeroOne(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen2.5-7b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "8")
	plans := map[bool]string{}
	for _, zero := range []bool{false, true} {
		cfg := DefaultConfig()
		if err := config.Load(&cfg, []string{"model.path=" + dir, "trainer.dry_run=true", "trainer.device=cuda",
			"trainer.device_memory=80GB", "model.max_context=4096", "trainer.default_local_dir=" + filepath.Join(dir, "run"),
			"actor.use_kl_loss=true", "data.train_batch_size=128", "rollout.n=5", "rollout.slots=20",
			"dp.zero1=" + strconv.FormatBool(zero)}, nil); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), &cfg, &out); err != nil {
			t.Fatal(err)
		}
		plans[zero] = out.String()
	}
	t.Logf("Qwen2.5-7B, rank 0 of 8, dp.zero1:\n%s", plans[true])
	for _, s := range []string{"per rank of 8 with ZeRO-1", "ZeRO-1 shard: 951952064 of 7615616512 values", "data-parallel scratch"} {
		if !strings.Contains(plans[true], s) {
			t.Errorf("the zero1 plan lacks %q:\n%s", s, plans[true])
		}
	}
	if !strings.Contains(plans[false], "per rank of 8\n") || !strings.Contains(plans[false], "all-reduce the fp32 gradients in place") {
		t.Errorf("the all-reduce plan:\n%s", plans[false])
	}
}

// TestDryRunPlansTheReferenceAsLoaded: with no SFT the reference policy is
// model.path itself, loaded frozen, and a bf16 folder stays bf16 on the CPU,
// so the plan counts 2 bytes a parameter; after SFT the reference is the
// float32 sft/ folder and the plan counts 4.
func TestDryRunPlansTheReferenceAsLoaded(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen2.5-0.5b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sft, want string }{
		{"0", "frozen (no gradients), weights stored as bf16"},
		{"5", "frozen (no gradients), fp32 weights"},
	} {
		cfg := DefaultConfig()
		if err := config.Load(&cfg, []string{"model.path=" + dir, "trainer.dry_run=true", "trainer.device=cpu",
			"trainer.device_memory=64GiB", "actor.use_kl_loss=true", "sft.steps=" + c.sft}, nil); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), &cfg, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("sft.steps=%s: the reference line is not %q:\n%s", c.sft, c.want, out.String())
		}
	}
}
