package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/r1go/r1go/model"
)

// Qwen2.5-0.5B shapes.
const (
	hidden   = 896
	inter    = 4864
	heads    = 14
	kvHeads  = 2
	headSize = 64
	vocab    = 151936
	seqLen   = 1024
)

// fill uploads seeded normal values times scale: every device gets the
// same numbers for the same seed.
func fill(d model.Device, b model.Buffer, seed uint64, scale float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	x := make([]float32, b.Len())
	for i := range x {
		x[i] = float32(scale * rng.NormFloat64())
	}
	d.Upload(b, x)
}

func randBuf(d model.Device, n int, seed uint64, scale float64) model.Buffer {
	b := d.Alloc(n)
	fill(d, b, seed, scale)
	return b
}

func packed(T int) []int32 {
	seqs := []int32{0}
	for s := seqLen; s < T; s += seqLen {
		seqs = append(seqs, int32(s))
	}
	return append(seqs, int32(T))
}

func positions(seqs []int32) []int32 {
	pos := make([]int32, seqs[len(seqs)-1])
	for s := 0; s+1 < len(seqs); s++ {
		for t := seqs[s]; t < seqs[s+1]; t++ {
			pos[t] = t - seqs[s]
		}
	}
	return pos
}

// causalFlops is the matmul work of causal attention over seqs: QKᵀ and
// PV, 2·HS FLOPs per (query, visible key) pair each, for every head.
func causalFlops(seqs []int32, nh, hs int) float64 {
	var pairs float64
	for s := 0; s+1 < len(seqs); s++ {
		n := float64(seqs[s+1] - seqs[s])
		pairs += n * (n + 1) / 2
	}
	return 4 * pairs * float64(hs) * float64(nh)
}

func cases(T, adamN int) []labCase {
	C, I, W := hidden, inter, (heads+2*kvHeads)*headSize
	seqs := packed(T)
	pos := positions(seqs)
	Th := min(T, 1024) // LM head tokens: the CPU reference is V/C times a layer's matmul
	targets := make([]int32, Th)
	for t := range targets {
		targets[t] = int32((t*7919 + 1) % vocab)
	}
	ids := make([]int32, T)
	for t := range ids {
		ids[t] = int32((t*104729 + 7) % vocab)
	}
	shape := func(format string, a ...any) string { return fmt.Sprintf(format, a...) }
	return []labCase{
		{name: "gemm", shape: shape("[%d,%d]·[%d,%d]ᵀ (MLP up)", T, C, 2*I, C), flops: 2 * float64(T) * float64(C) * float64(2*I),
			setup: func(d model.Device) (func(), []model.Buffer) {
				a, b, c := randBuf(d, T*C, 1, 1), randBuf(d, 2*I*C, 2, 0.05), d.Alloc(T*2*I)
				return func() { d.Gemm(false, true, T, 2*I, C, 1, a, C, b, C, 0, c, 2*I) }, []model.Buffer{c}
			}},
		{name: "residual", shape: shape("[%d,%d]", T, C), bytes: 12 * float64(T*C),
			setup: func(d model.Device) (func(), []model.Buffer) {
				a, b, o := randBuf(d, T*C, 3, 1), randBuf(d, T*C, 4, 1), d.Alloc(T*C)
				return func() { d.Add(o, a, b) }, []model.Buffer{o}
			}},
		{name: "embedding", shape: shape("%d ids, [%d,%d] table", T, vocab, C), bytes: 8 * float64(T*C),
			setup: func(d model.Device) (func(), []model.Buffer) {
				table, o := randBuf(d, vocab*C, 5, 1), d.Alloc(T*C)
				return func() { d.Embedding(o, ids, table, C) }, []model.Buffer{o}
			}},
		{name: "rmsnorm", shape: shape("[%d,%d]", T, C), bytes: 8 * float64(T*C),
			setup: func(d model.Device) (func(), []model.Buffer) {
				x, w, o, r := randBuf(d, T*C, 6, 1), randBuf(d, C, 7, 1), d.Alloc(T*C), d.Alloc(T)
				return func() { d.RMSNorm(o, nil, r, x, nil, w, T, C, 1e-6) }, []model.Buffer{o, r}
			}},
		{name: "rmsnorm_backward", shape: shape("[%d,%d]", T, C), bytes: 12 * float64(T*C),
			setup: func(d model.Device) (func(), []model.Buffer) {
				x, w, o, r := randBuf(d, T*C, 6, 1), randBuf(d, C, 7, 1), d.Alloc(T*C), d.Alloc(T)
				d.RMSNorm(o, nil, r, x, nil, w, T, C, 1e-6)
				dy, dx, dw := randBuf(d, T*C, 8, 1), d.Alloc(T*C), d.Alloc(C)
				return func() { d.RMSNormBackward(dx, nil, dw, dy, x, w, r, nil, T, C) }, []model.Buffer{dx, dw}
			}},
		{name: "rope", shape: shape("[%d, %d heads of %d]", T, heads, headSize), bytes: 8 * float64(T*heads*headSize),
			setup: func(d model.Device) (func(), []model.Buffer) {
				x := randBuf(d, T*W, 9, 1)
				return func() { d.RoPE(x, W, 0, pos, heads, headSize, 1e6) }, []model.Buffer{x}
			}},
		{name: "swiglu", shape: shape("[%d,%d]", T, I), bytes: 12 * float64(T*I),
			setup: func(d model.Device) (func(), []model.Buffer) {
				gu, o := randBuf(d, T*2*I, 10, 2), d.Alloc(T*I)
				return func() { d.SwiGLU(o, gu, T, I) }, []model.Buffer{o}
			}},
		{name: "swiglu_backward", shape: shape("[%d,%d]", T, I), bytes: 20 * float64(T*I),
			setup: func(d model.Device) (func(), []model.Buffer) {
				gu, dy, dgu := randBuf(d, T*2*I, 10, 2), randBuf(d, T*I, 11, 1), d.Alloc(T*2*I)
				return func() { d.SwiGLUBackward(dgu, dy, gu, T, I) }, []model.Buffer{dgu}
			}},
		{name: "attention", shape: shape("%d seqs of ≤%d, %d/%d heads of %d", len(seqs)-1, min(T, seqLen), heads, kvHeads, headSize),
			flops: causalFlops(seqs, heads, headSize),
			setup: func(d model.Device) (func(), []model.Buffer) {
				qkv, o, lse := randBuf(d, T*W, 12, 1), d.Alloc(T*heads*headSize), d.Alloc(heads*T)
				return func() { d.Attention(o, lse, qkv, seqs, heads, kvHeads, headSize) }, []model.Buffer{o, lse}
			}},
		{name: "attention_backward", shape: shape("%d seqs of ≤%d, %d/%d heads of %d", len(seqs)-1, min(T, seqLen), heads, kvHeads, headSize),
			flops: 2.5 * causalFlops(seqs, heads, headSize), // QKᵀ, dO·Vᵀ, dQ, dK, dV
			setup: func(d model.Device) (func(), []model.Buffer) {
				qkv, o, lse := randBuf(d, T*W, 12, 1), d.Alloc(T*heads*headSize), d.Alloc(heads*T)
				d.Attention(o, lse, qkv, seqs, heads, kvHeads, headSize)
				dy, dqkv := randBuf(d, T*heads*headSize, 13, 1), d.Alloc(T*W)
				return func() { d.AttentionBackward(dqkv, dy, o, lse, qkv, seqs, heads, kvHeads, headSize) }, []model.Buffer{dqkv}
			}},
		{name: "lmhead", shape: shape("%d tokens, V %d", Th, vocab), flops: 2 * float64(Th) * float64(C) * float64(vocab),
			setup: func(d model.Device) (func(), []model.Buffer) {
				h, w := randBuf(d, Th*C, 14, 1), randBuf(d, vocab*C, 15, 0.05)
				lp, ent, lse := d.Alloc(Th), d.Alloc(Th), d.Alloc(Th)
				return func() { d.LMHead(lp, ent, lse, nil, h, w, targets, Th, C, vocab) }, []model.Buffer{lp, ent, lse}
			}},
		{name: "lmhead_backward", shape: shape("%d tokens, V %d", Th, vocab), flops: 6 * float64(Th) * float64(C) * float64(vocab),
			setup: func(d model.Device) (func(), []model.Buffer) {
				h, w := randBuf(d, Th*C, 14, 1), randBuf(d, vocab*C, 15, 0.05)
				lp, ent, lse := d.Alloc(Th), d.Alloc(Th), d.Alloc(Th)
				d.LMHead(lp, ent, lse, nil, h, w, targets, Th, C, vocab)
				glp, gent, dh, dw := randBuf(d, Th, 16, 1), randBuf(d, Th, 17, 1), d.Alloc(Th*C), d.Alloc(vocab*C)
				return func() { d.LMHeadBackward(dh, dw, glp, gent, nil, h, w, lse, ent, targets, Th, C, vocab) }, []model.Buffer{dh, dw}
			}},
		{name: "adamw", shape: shape("%d values", adamN), bytes: 28 * float64(adamN),
			setup: func(d model.Device) (func(), []model.Buffer) {
				n := adamN
				p, g, m, v := randBuf(d, n, 18, 1), randBuf(d, n, 19, 1e-3), d.Alloc(n), d.Alloc(n)
				hp := model.AdamWParams{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1, GradScale: 1}
				return func() { d.AdamW(p, g, m, v, hp) }, []model.Buffer{p, m, v}
			}},
	}
}
