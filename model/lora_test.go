package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/r1go/r1go/model/safetensors"
)

// adaptedGolden loads the golden tiny model name frozen, with the PEFT
// adapter folder testdata/lora/make_lora.py wrote for it.
func adaptedGolden(t *testing.T, name string) (*Model, *LoRA) {
	t.Helper()
	m, err := LoadWith(filepath.Join("testdata", "golden", name), NewCPU(), LMHeadOutput, LoadOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	lo, err := m.LoadAdapter(filepath.Join("testdata", "lora", name+"_adapter"))
	if err != nil {
		t.Fatal(err)
	}
	return m, lo
}

// checkAdaptedStep runs one training forward and backward of the golden
// case through the adapted model and checks its logprobs, entropies and
// every adapter gradient against the golden file gf; it returns the batch
// and the forward's outputs.
func checkAdaptedStep(t *testing.T, m *Model, lo *LoRA, gc goldenCase, gf *safetensors.File, check func(what string, got, want []float32)) (Batch, *Output) {
	t.Helper()
	b := Batch{Tokens: gc.tokens, Seqs: gc.seqs}
	out, err := m.Forward(b, true)
	if err != nil {
		t.Fatal(err)
	}
	check("logprob", out.LogProb, readGolden(t, gf, "logprob"))
	check("entropy", out.Entropy, readGolden(t, gf, "entropy"))
	lo.ZeroGrads(m.Dev)
	if err := m.Backward(gc.a, gc.b, nil); err != nil {
		t.Fatal(err)
	}
	grads, _ := HostFloat32(lo.Grads)
	for _, s := range lo.specs {
		check("grad "+s.Name, grads[s.Off:s.Off+s.size()], readGolden(t, gf, "grad."+s.Name))
	}
	return b, out
}

// TestLoRAPyTorchParity loads PEFT adapter folders written by
// testdata/lora/make_lora.py onto the golden tiny models (frozen; float32
// and bf16-free) and checks the adapted logprobs, entropies and every
// lora_A/lora_B gradient against PyTorch's float64 values, with and
// without recomputation.
func TestLoRAPyTorchParity(t *testing.T) {
	for _, name := range []string{"qwen2_tied", "qwen2_untied"} {
		for _, recompute := range []bool{false, true} {
			gc := loadGoldenCase(t, name)
			m, lo := adaptedGolden(t, name)
			m.Recompute = recompute
			gf, err := safetensors.Open(filepath.Join("testdata", "lora", name+".lora_golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []float32) {
				t.Helper()
				if e := relErr(got, want); e > 1e-4 || math.IsNaN(e) {
					t.Errorf("%s %s (recompute=%v): relative error %.3g > 1e-4", name, what, recompute, e)
				}
			}
			b, _ := checkAdaptedStep(t, m, lo, gc, gf, check)
			// The base view computes the model without adapters: the golden logprobs.
			bout, err := m.Base().Forward(b, false)
			if err != nil {
				t.Fatal(err)
			}
			bf, _ := safetensors.Open(filepath.Join("testdata", "golden", name+".golden.safetensors"))
			check("base logprob", bout.LogProb, readGolden(t, bf, "logprob"))
			bf.Close()
			gf.Close()
		}
	}
}

// TestLoRASaveLoadMerge saves adapters as a PEFT folder, checks its keys
// and config against PEFT's layout, loads it onto a fresh base (training
// continues from the same values) and checks that the merged HF folder
// computes what base + adapters compute.
func TestLoRASaveLoadMerge(t *testing.T) {
	base := filepath.Join("testdata", "golden", "qwen2_untied")
	m, err := LoadWith(base, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	lo, err := m.LoadAdapter(filepath.Join("testdata", "lora", "qwen2_untied_adapter"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := lo.SaveAdapter(dir, m.Dev, base); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4.0, "lora_alpha": 8.0, "bias": "none", "lora_dropout": 0.0} {
		if cfg[k] != want {
			t.Errorf("adapter_config.json %s = %v, want %v", k, cfg[k], want)
		}
	}
	f, err := safetensors.Open(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	names := f.Names()
	f.Close()
	if len(names) != 2*7*2 || !slices.Contains(names, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") ||
		!slices.Contains(names, "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight") {
		t.Fatalf("adapter tensors %v do not follow PEFT's names", names)
	}
	m2, _ := LoadWith(base, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true})
	lo2, err := m2.LoadAdapter(dir)
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := HostFloat32(lo.Params)
	p2, _ := HostFloat32(lo2.Params)
	if !slices.Equal(p1, p2) {
		t.Fatal("adapters changed in the PEFT round trip")
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if err := m.SaveMerged(merged, nil, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	mm, err := Load(merged, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Tokens: []int32{1, 5, 9, 2, 7, 3}, Seqs: []int32{0, 2, 6}}
	want, _ := m.Forward(b, false)
	got, _ := mm.Forward(b, false)
	if e := relErr(got.LogProb, want.LogProb); e > 1e-5 {
		t.Fatalf("merged model differs from base + adapters by %.3g", e)
	}
	if _, err := m.AttachLoRA(LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{"q_proj"}}, 1); err == nil {
		t.Fatal("a second set of adapters was attached")
	}
	tr, _ := Load(base, NewCPU(), LMHeadOutput)
	if _, err := tr.AttachLoRA(LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{"q_proj"}}, 1); err == nil {
		t.Fatal("adapters on a trainable (not frozen) base were accepted")
	}
	for _, bad := range []LoRAConfig{{Rank: 2, Alpha: 4, TargetModules: []string{"qproj"}}, {Rank: 2, Alpha: 0, TargetModules: []string{"q_proj"}},
		{Rank: 2, Alpha: 4, Dropout: 1, TargetModules: []string{"q_proj"}}, {Rank: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("LoRA config %+v was accepted", bad)
		}
	}
}

// TestLoRAOnBF16BaseTrains attaches fresh adapters (B = 0: the adapted
// model starts equal to the base) to a frozen bf16 base and checks that a
// step of gradient descent on the adapters raises the objective.
func TestLoRAOnBF16BaseTrains(t *testing.T) {
	m32 := bf16Rounded(t, true, 3)
	m, err := m32.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	lo, err := m.AttachLoRA(LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{"all-linear"}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}, Seqs: []int32{0, 8}}
	o0, _ := m.Forward(b, true)
	ref, _ := m32.Forward(b, false)
	if e := relErr(o0.LogProb, ref.LogProb); e > 1e-6 {
		t.Fatalf("fresh adapters change the model by %.3g", e)
	}
	sum := func(v []float32) (s float64) {
		for _, x := range v {
			s += float64(x)
		}
		return s
	}
	ones := make([]float32, len(b.Tokens))
	for i := range ones {
		ones[i] = 1
	}
	lo.ZeroGrads(m.Dev)
	if err := m.Backward(ones, nil, nil); err != nil {
		t.Fatal(err)
	}
	p, _ := HostFloat32(lo.Params)
	g, _ := HostFloat32(lo.Grads)
	for i := range p {
		p[i] += 0.05 * g[i]
	}
	o1, _ := m.Forward(b, false)
	if !(sum(o1.LogProb) > sum(o0.LogProb)) {
		t.Fatalf("a gradient step on the adapters did not raise Σ logprob: %v -> %v", sum(o0.LogProb), sum(o1.LogProb))
	}
}
