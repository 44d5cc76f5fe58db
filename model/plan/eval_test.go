package plan

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestEvalPlanMatchesCPUAllocations plans what cmd/eval holds (the policy
// and the base model loaded frozen, fp32 or bf16 as their folder, each
// evaluated in turn: a KV cache for the evaluation, a step of prefills and
// one of decodes)
// and compares the plan, less its workspace, with the peak of a counting
// CPU device: within 10%.
func TestEvalPlanMatchesCPUAllocations(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		name := fmt.Sprintf("frozen bf16=%v", bf16)
		cfg := tinyConfig(t, "qwen2")
		s := Settings{Device: "cpu", FrozenBF16: bf16, BaseModel: true, RolloutSlots: 6, MaxContext: 40, MaxPromptTokens: 7, GroupSize: 1}
		p, err := New(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		dev := &counting{Device: cpu.New()}
		dtype := "float32"
		if bf16 {
			dtype = "bfloat16"
		}
		src, err := model.New(cfg, cpu.New(), model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		src.InitRandom(1)
		var frozen [2]*model.Model
		for i := range frozen {
			// As LoadWith builds a frozen model: its arena on dev, filled.
			m, err := model.NewWith(cfg, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: dtype})
			if err != nil {
				t.Fatal(err)
			}
			dev.Copy(m.Params, src.Params)
			frozen[i] = m
		}
		for _, m := range frozen {
			// Evaluate's cache lives for one evaluation; each model keeps
			// its own step activations.
			cache := m.NewKVCache(s.RolloutSlots, s.MaxContext)
			var chunks []model.Chunk
			for slot := 0; slot < s.RolloutSlots; slot++ {
				chunks = append(chunks, model.Chunk{Slot: slot, Tokens: make([]int32, s.MaxPromptTokens)})
			}
			for range 2 {
				if _, err := m.Step(cache, chunks); err != nil {
					t.Fatal(err)
				}
				for i := range chunks {
					chunks[i].Tokens = chunks[i].Tokens[:1]
				}
			}
			cache.Free(dev)
		}
		withinTenPercent(t, name, p, dev.peak)
	}
}

// withinTenPercent compares a plan, less its workspace (which lives outside
// the arenas), with a measured peak of the arenas: within 10%.
func withinTenPercent(t *testing.T, name string, p *Plan, peak int64) {
	t.Helper()
	if p.Items[len(p.Items)-1].Name != "workspace" {
		t.Fatal("the last item is not the workspace")
	}
	want := p.Total() - p.Items[len(p.Items)-1].Bytes
	r := float64(want) / float64(peak)
	t.Logf("%s: plan %d B, measured %d B, ratio %.4f", name, want, peak, r)
	if math.Abs(r-1) > 0.10 || math.IsNaN(r) {
		var sb strings.Builder
		p.Print(&sb)
		t.Errorf("%s: plan %d B (less workspace), measured peak %d B (ratio %.3f)\n%s", name, want, peak, r, sb.String())
	}
}
