package model

import (
	"runtime"
	"testing"
)

// heapDelta is the growth of the live heap across fn, after collections.
func heapDelta(fn func() any) (float64, any) {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	keep := fn()
	runtime.GC()
	runtime.ReadMemStats(&b)
	return float64(b.HeapAlloc) - float64(a.HeapAlloc), keep
}

// TestStorageBytesPerParameter checks the memory plan's per-parameter
// costs against measured heap growth (within 10 %): a trainable float32
// model 8 bytes (weights + gradients), a frozen float32 model 4, a frozen
// bf16 model 2; rank-r adapters r·(in+out) values per projection, weights
// and gradients in float32.
func TestStorageBytesPerParameter(t *testing.T) {
	cfg := tinyConfig(t, true)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.VocabSize = 256, 704, 4, 4096
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
	n := 0
	for _, tc := range []struct {
		name string
		opt  LoadOptions
		per  float64
	}{{"trainable float32", LoadOptions{}, 8}, {"frozen float32", LoadOptions{Frozen: true}, 4}, {"frozen bf16", LoadOptions{Frozen: true, DType: "bfloat16"}, 2}} {
		got, keep := heapDelta(func() any {
			m, err := NewWith(cfg, NewCPU(), LMHeadOutput, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			n = m.NumParams()
			return m
		})
		want := tc.per * float64(n)
		if got < 0.9*want || got > 1.1*want {
			t.Errorf("%s: %.0f bytes for %d parameters, the plan says %.0f", tc.name, got, n, want)
		}
		runtime.KeepAlive(keep)
	}
	base, _ := NewWith(cfg, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true, DType: "bfloat16"})
	got, keep := heapDelta(func() any {
		lo, err := base.AttachLoRA(LoRAConfig{Rank: 16, Alpha: 32, TargetModules: []string{"all-linear"}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lo
	})
	C, I, Q, KV := 256, 704, 256, 128
	perLayer := 16 * ((C + Q) + 2*(C+KV) + (Q + C) + 2*(C+I) + (I + C))
	want := 8 * float64(4*perLayer)
	if got < 0.9*want || got > 1.1*want {
		t.Errorf("adapters: %.0f bytes, the plan says %.0f", got, want)
	}
	runtime.KeepAlive(keep)
	runtime.KeepAlive(base)
}
