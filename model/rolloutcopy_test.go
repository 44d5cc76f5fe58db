package model

import (
	"math"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// rolloutCopyCase is a random three-layer policy on the CPU (the golden
// qwen2_tied config, its dimensions multiples of 32, the dot path's k, and
// more than a kernel tile of rows and columns) and its rollout copy.
func rolloutCopyCase(t *testing.T, seed uint64) (*Config, *Model, *Model) {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("testdata", "golden", "qwen2_tied", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.NumHiddenLayers = 128, 320, 515, 3
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDimOverride = 4, 2, 0
	pol, err := New(cfg, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	pol.InitRandom(seed)
	cp, err := pol.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, pol, cp
}

// TestRolloutCopyBF16Products checks a rollout copy (frozen bf16 weights
// with BF16Products) against the float32 policy it was rounded from: the
// logits of a prefill of 3 sequences and of 5 decode steps of all 3 must
// agree within what rounding the weights and the products' inputs to bf16
// allows (relative 2⁻⁶ of the largest logit: a handful of bf16 ulps summed
// over a few layers), and with a plain bf16 copy (exact products) within the
// inputs' rounding alone. CopyWeightsFrom must follow a policy whose
// weights changed, and DiscardWeights must leave zeros until the next copy.
func TestRolloutCopyBF16Products(t *testing.T) {
	if !gemm.HasDotBF16() {
		t.Log("no AVX512_BF16: the copy's products take the exact bf16 path")
	}
	cfg, pol, dotCopy := rolloutCopyCase(t, 3)
	exact, err := pol.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	if !dotCopy.products || !IsBF16(dotCopy.Params) {
		t.Fatalf("the copy's weights are %T", dotCopy.Params)
	}
	logits := func(m *Model) []float32 {
		c := m.NewKVCache(3, 32)
		if bf := IsBF16(c.K[0]); bf != (m == dotCopy && !kvCacheF32) {
			t.Fatalf("a KV cache in %T for a model with weights in %T", c.K[0], m.Params)
		}
		chunks := []Chunk{{Slot: 0, Tokens: []int32{1, 2, 3, 4, 5}}, {Slot: 1, Tokens: []int32{7, 8}}, {Slot: 2, Tokens: []int32{500, 9, 10, 11}}}
		var all []float32
		for step := 0; step < 6; step++ {
			l, err := m.Step(c, chunks)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, l...)
			for s := range chunks {
				chunks[s].Tokens = []int32{int32((step*37 + s*11) % cfg.VocabSize)}
			}
		}
		return all
	}
	want := logits(pol)
	check := func(what string, got []float32, tol float64) {
		t.Helper()
		var scale, diff float64
		for i := range want {
			scale = math.Max(scale, math.Abs(float64(want[i])))
			diff = math.Max(diff, math.Abs(float64(got[i]-want[i])))
		}
		if !(diff <= tol*scale) || scale == 0 {
			t.Errorf("%s: logits differ by %.3g of the largest %.3g (tolerance %.3g relative)", what, diff, scale, tol)
		}
		t.Logf("%s: max |Δ logit| %.3g of %.3g", what, diff/scale, scale)
	}
	check("bf16 copy, exact products", logits(exact), 1.0/64)
	check("bf16 copy, bf16 products", logits(dotCopy), 1.0/64)
	kvCacheF32 = true
	check("bf16 copy, bf16 products, float32 KV cache", logits(dotCopy), 1.0/64)
	kvCacheF32 = false
	// A copied slot of the bf16 cache continues exactly as its source.
	c := dotCopy.NewKVCache(2, 16)
	if _, err := dotCopy.Step(c, []Chunk{{Slot: 1, Tokens: []int32{4, 5, 6}}}); err != nil {
		t.Fatal(err)
	}
	c.CopySlot(dotCopy.Dev, 0, 1)
	two, err := dotCopy.Step(c, []Chunk{{Slot: 0, Tokens: []int32{9}}, {Slot: 1, Tokens: []int32{9}}})
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "a copied slot of the bf16 cache against its source", two[:cfg.VocabSize], two[cfg.VocabSize:])

	// The policy trains on: the copy follows it.
	w, _ := HostFloat32(pol.Params)
	for i := range w {
		w[i] *= 0.5
	}
	want = logits(pol)
	dotCopy.DiscardWeights()
	h, _ := HostBF16(dotCopy.Dev, dotCopy.Params)
	nonzero := 0
	for _, v := range h {
		if v != 0 {
			nonzero++
		}
	}
	if nonzero > len(h)/50 {
		t.Errorf("%d of %d weights nonzero after DiscardWeights", nonzero, len(h))
	}
	if err := dotCopy.CopyWeightsFrom(pol); err != nil {
		t.Fatal(err)
	}
	check("bf16 products after CopyWeightsFrom", logits(dotCopy), 1.0/64)
	other, _ := New(cfg, NewCPU(), ValueHeadOutput)
	if err := dotCopy.CopyWeightsFrom(other); err == nil {
		t.Error("CopyWeightsFrom a model of another shape was taken")
	}
}

// A rollout copy's bf16 KV cache on the CPU is one buffer (KVCacheHugePages):
// each layer's keys then values, slices that neither overlap nor leave gaps,
// in huge pages where the kernel lends them on request; the decode through
// it matches the same cache in small pages bit for bit, and Free lets it go.
func TestKVCacheArena(t *testing.T) {
	cfg, _, cp := rolloutCopyCase(t, 5)
	lent := thpLent()
	const slots, maxLen = 8, 2800 // 3 layers · 2 · 8 · 2800 · 64 values: 17 MiB, past pages.MinBytes
	decode := func(huge bool) []float32 {
		was := *KVCacheHugePages
		*KVCacheHugePages = huge
		defer func() { *KVCacheHugePages = was }()
		before := pages.AnonHugeBytes()
		c := cp.NewKVCache(slots, maxLen)
		arena, ok := HostBF16(cp.Dev, c.arena)
		if !ok {
			t.Fatalf("the copy's cache arena is %T", c.arena)
		}
		per := slots * maxLen * cp.d.KV
		if len(arena) != 2*cfg.NumHiddenLayers*per {
			t.Fatalf("arena of %d values, want %d", len(arena), 2*cfg.NumHiddenLayers*per)
		}
		for l := range c.K {
			for j, b := range []Buffer{c.K[l], c.V[l]} {
				s, _ := HostBF16(cp.Dev, b)
				if len(s) != per || cap(s) != per || &s[0] != &arena[(2*l+j)*per] {
					t.Fatalf("layer %d buffer %d: %d values (cap %d) at the wrong place in the arena", l, j, len(s), cap(s))
				}
			}
		}
		chunks := []Chunk{{Slot: 0, Tokens: []int32{1, 2, 3}}, {Slot: 5, Tokens: []int32{9}}, {Slot: 7, Tokens: []int32{4, 4}}}
		var all []float32
		for step := range 4 {
			l, err := cp.Step(c, chunks)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, l...)
			for s := range chunks {
				chunks[s].Tokens = []int32{int32((step*31 + s*7) % cfg.VocabSize)}
			}
		}
		clear(arena) // every page written: the kernel has placed them all
		mode, after := pages.Mode(), pages.AnonHugeBytes()
		aligned := uintptr(unsafe.Pointer(&arena[0]))%pages.HugeSize == 0
		t.Logf("huge %v, THP %q: aligned %v, huge pages %d → %d MiB", huge, mode, aligned, before>>20, after>>20)
		if huge && (mode == "always" || mode == "madvise") && !lent {
			t.Logf("THP %s, but a plain request for a huge page was refused here (qemu-user, a cgroup): the arena's pages go unchecked", mode)
		}
		if huge && (mode == "always" || mode == "madvise") && lent {
			if !aligned {
				t.Errorf("THP %s: the arena does not start on a huge page", mode)
			}
			if before >= 0 && after-before < int64(len(arena)) { // half its 2-byte values' bytes
				t.Errorf("THP %s: a written %d MiB arena added %d MiB of huge pages", mode, 2*len(arena)>>20, (after-before)>>20)
			}
		}
		c.Free(cp.Dev)
		if c.arena != nil || c.K != nil || c.V != nil {
			t.Error("Free kept the cache's buffers")
		}
		return all
	}
	sameBits(t, "decode with the cache in huge pages and in small", decode(true), decode(false))
}
