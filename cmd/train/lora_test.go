package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/safetensors"
)

// TestLoRARunTrainsAdapters runs SFT and two GRPO steps with rank-4
// adapters on every projection: checkpoints hold a PEFT folder whose
// lora_B (zero at the start) was trained, and a resumed run restores the
// adapters and goes on training them.
func TestLoRARunTrainsAdapters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer twice")
	}
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.SFT.Steps = 2
	c.Trainer.TotalSteps, c.Trainer.SaveFreq = 2, 1
	c.RL.Actor.LoRA = model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{"all-linear"}}
	c.RL.Actor.UseKLLoss = true // the reference is the frozen base
	c.RL.Actor.Optim.LR = 1e-3
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	adapterB := func(step int) []float32 {
		t.Helper()
		ad := filepath.Join(dir, fmt.Sprintf("global_step_%d", step), adapterDir)
		lc, err := model.ReadAdapterConfig(ad)
		if err != nil {
			t.Fatal(err)
		}
		if lc.Rank != 4 || lc.Alpha != 8 || len(lc.TargetModules) != 7 {
			t.Fatalf("adapter config %+v", lc)
		}
		return readTensor(t, filepath.Join(ad, "adapter_model.safetensors"), "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")
	}
	b2 := adapterB(2)
	if nonzero(b2) == 0 {
		t.Fatal("lora_B is still zero after SFT and two RL steps")
	}
	if _, err := os.Stat(filepath.Join(dir, "global_step_2", "actor", "config.json")); err != nil {
		t.Fatalf("no merged HF folder in the checkpoint: %v", err)
	}
	// Resume from step 2 and train one more step: the adapters move on.
	c.Trainer.TotalSteps, c.Trainer.Resume = 3, true
	out.Reset()
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	b3 := adapterB(3)
	same := true
	for i := range b3 {
		if b3[i] != b2[i] {
			same = false
		}
	}
	if same {
		t.Fatal("the resumed run did not change the adapters")
	}
}

// nonzero counts the values that are not zero.
func nonzero(v []float32) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

// readTensor reads one tensor of a safetensors file as float32.
func readTensor(t *testing.T, path, name string) []float32 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, ok := f.Info(name)
	if !ok {
		t.Fatalf("%s: no tensor %s", path, name)
	}
	v := make([]float32, info.NumElements())
	if err := f.ReadF32(name, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLoRAOnABF16Folder: the base of a LoRA run loads frozen, so a bf16
// folder stays bf16 (half the memory of a float32 base, and no gradient
// arena at any point): the plan says so, SFT and a GRPO step train the
// adapters through the bf16 base, and the merged folder is saved as bf16.
func TestLoRAOnABF16Folder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	src := filepath.Join("testdata", "warmstart")
	m, err := model.Load(src, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(t.TempDir(), "bf16")
	if err := m.Save(folder, nil, model.SaveOptions{DType: "bfloat16", TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.Model.Path, c.SFT.Steps = folder, 2 // SFT moves lora_B off zero even where RL's advantages are all 0
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.TestFreq = 1, 1, 1
	c.RL.Actor.LoRA = model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{"all-linear"}}
	c.RL.Actor.UseKLLoss = true
	c.RL.Actor.Optim.LR = 1e-3
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("× 2 B, frozen, bf16 as in the folder")) {
		t.Errorf("the plan does not hold a bf16 base:\n%s", out.String())
	}
	b := readTensor(t, filepath.Join(dir, "global_step_1", adapterDir, "adapter_model.safetensors"), "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")
	if nonzero(b) == 0 {
		t.Error("lora_B is still zero after SFT and a GRPO step on the bf16 base")
	}
	cfg, err := model.LoadConfig(filepath.Join(dir, "global_step_1", "actor", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DType != "bfloat16" {
		t.Errorf("merged folder saved as %q, want bfloat16 (the source's)", cfg.DType)
	}
}
