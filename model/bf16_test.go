package model

import (
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// bf16Rounded returns a float32 model whose weights are exactly bf16 values.
func bf16Rounded(t *testing.T, tied bool, seed uint64) *Model {
	t.Helper()
	m, err := New(tinyConfig(t, tied), NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(seed)
	p, _ := HostFloat32(m.Params)
	for i, v := range p {
		p[i] = bf16.ToFloat32(bf16.FromFloat32(v))
	}
	return m
}

// TestFrozenBF16MatchesFloat32 runs a frozen bf16 copy and the float32
// model it came from over the same batch and the same decode steps: with
// weights that are bf16 values to begin with, widening on the fly computes
// the same products, so the outputs agree to float32 rounding.
func TestFrozenBF16MatchesFloat32(t *testing.T) {
	for _, tied := range []bool{true, false} {
		m := bf16Rounded(t, tied, 7)
		h, err := m.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16"})
		if err != nil {
			t.Fatal(err)
		}
		if !IsBF16(h.Params) || !h.Frozen() || h.Grads != nil {
			t.Fatal("CloneWith bfloat16 did not make a frozen bf16 model")
		}
		b := Batch{Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Seqs: []int32{0, 4, 10}}
		want, err := m.Forward(b, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.Forward(b, false)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(got.LogProb, want.LogProb); e > 1e-6 {
			t.Fatalf("tied=%v: bf16 logprobs differ by %.3g", tied, e)
		}
		if e := relErr(got.Entropy, want.Entropy); e > 1e-6 {
			t.Fatalf("tied=%v: bf16 entropies differ by %.3g", tied, e)
		}
		c1, c2 := m.NewKVCache(2, 16), h.NewKVCache(2, 16)
		for _, tok := range [][]int32{{1, 2, 3}, {4}, {5}} {
			a, err := m.Step(c1, []Chunk{{Slot: 1, Tokens: tok}})
			if err != nil {
				t.Fatal(err)
			}
			g, err := h.Step(c2, []Chunk{{Slot: 1, Tokens: tok}})
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(g, a); e > 1e-6 {
				t.Fatalf("tied=%v: bf16 decode logits differ by %.3g", tied, e)
			}
		}
		if _, err := h.Forward(b, true); err != nil {
			t.Fatal(err)
		}
		if err := h.Backward(make([]float32, 10), nil, nil); err == nil {
			t.Fatal("Backward on a frozen model did not fail")
		}
	}
}

// TestLoadAutoBF16 saves a model as bf16 and loads it three ways: trainable
// float32, frozen auto (bf16, since every tensor is stored as BF16) and
// frozen auto from a float32 folder (float32: nothing may be rounded).
func TestLoadAutoBF16(t *testing.T) {
	m := bf16Rounded(t, true, 9)
	dir := filepath.Join(t.TempDir(), "bf16")
	if err := m.Save(dir, nil, SaveOptions{DType: "bfloat16"}); err != nil {
		t.Fatal(err)
	}
	f32, err := Load(dir, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	fz, err := LoadWith(dir, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true, DType: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if IsBF16(f32.Params) || !IsBF16(fz.Params) {
		t.Fatalf("bf16 folder: trainable load bf16=%v, frozen auto bf16=%v", IsBF16(f32.Params), IsBF16(fz.Params))
	}
	a, b := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	want, _ := HostFloat32(m.Params)
	f32.Dev.Download(a, f32.Params)
	fz.Dev.Download(b, fz.Params)
	for i := range want {
		if a[i] != want[i] || b[i] != want[i] {
			t.Fatalf("parameter %d: saved %v, loaded float32 %v, loaded bf16 %v", i, want[i], a[i], b[i])
		}
	}
	dir32 := filepath.Join(t.TempDir(), "f32")
	if err := m.Save(dir32, nil, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	fz32, err := LoadWith(dir32, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true, DType: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if IsBF16(fz32.Params) {
		t.Fatal("a float32 folder was loaded as bf16 under auto")
	}
	if _, err := LoadWith(dir, NewCPU(), LMHeadOutput, LoadOptions{DType: "bfloat16"}); err == nil {
		t.Fatal("a trainable bf16 model was accepted")
	}
}

// TestSaveDTypeKeepsSource checks save_dtype's auto rule (bf16 in, bf16
// out; float32 in or unnamed, float32 out) and that the saved config's
// torch_dtype names what the weights are stored as.
func TestSaveDTypeKeepsSource(t *testing.T) {
	cfg := tinyConfig(t, true)
	for _, tc := range []struct{ src, setting, want string }{
		{"bfloat16", "auto", "bfloat16"}, {"float32", "", "float32"}, {"", "auto", "float32"}, {"bfloat16", "float32", "float32"},
	} {
		cfg.DType = tc.src
		got, err := SaveDTypeFor(cfg, tc.setting)
		if err != nil || got != tc.want {
			t.Errorf("source %q, setting %q: %q, %v; want %q", tc.src, tc.setting, got, err, tc.want)
		}
	}
	if _, err := SaveDTypeFor(cfg, "int8"); err == nil {
		t.Error("save dtype int8 was accepted")
	}
	m := bf16Rounded(t, true, 2)
	m.Config.DType = "bfloat16"
	dtype, _ := SaveDTypeFor(m.Config, "auto")
	dir := filepath.Join(t.TempDir(), "out")
	if err := m.Save(dir, nil, SaveOptions{DType: dtype}); err != nil {
		t.Fatal(err)
	}
	back, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	info, _ := w.dir.Info("model.embed_tokens.weight")
	if back.DType != "bfloat16" || info.DType != "BF16" {
		t.Fatalf("saved torch_dtype %q, stored %s; want bfloat16, BF16", back.DType, info.DType)
	}
}
