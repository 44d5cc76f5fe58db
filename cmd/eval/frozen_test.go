package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestEvalLoadsFrozen: the policy eval builds (agent.ModelConfig.Frozen)
// has no gradient arena and keeps a bf16 folder's bf16 on the CPU; the
// trainable load train uses is float32 with gradients.
func TestEvalLoadsFrozen(t *testing.T) {
	src := filepath.Join("..", "train", "testdata", "warmstart")
	m, err := model.Load(src, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(t.TempDir(), "bf16")
	if err := m.Save(folder, nil, model.SaveOptions{DType: "bfloat16", TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Data.SynthTrain, cfg.Data.SynthEval = 20, 4
	for _, frozen := range []bool{true, false} {
		mc := agent.ModelConfig{Path: folder, MaxContext: cfg.MaxContext, Frozen: frozen}
		s, err := agent.Build(context.Background(), mc, cfg.Data, cfg.Env, cpu.New(), filepath.Join(t.TempDir(), "build"))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Policy.Frozen() && cpu.IsBF16(s.Policy.Params); got != frozen {
			t.Errorf("Frozen %v: the policy is frozen bf16: %v", frozen, got)
		}
		s.Close()
	}
}
