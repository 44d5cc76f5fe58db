package main

import (
	"fmt"
	"os"
	"time"

	"github.com/r1go/r1go/model"
)

// The whole model, the figures a run cares about: a training step
// (forward and backward of a packed batch) in tokens per second and as a
// fraction of the GEMM ceiling (model FLOPs utilisation), and a decode
// step of many sequences against the KV cache in tokens per second. The
// CPU device runs the same model and batch for the x CPU ratio and the
// validation (logprobs of the forward).

// modelRow is one whole-model figure.
type modelRow struct {
	name, shape       string
	gpuMs, cpuMs      float64
	tokensPerS, ofMFU float64
	diff              float64
}

func (r modelRow) String() string {
	cpu, x, mfu := "-", "-", "-"
	if r.cpuMs > 0 {
		cpu, x = fmt.Sprintf("%.1f", r.cpuMs), fmt.Sprintf("%.3g", r.cpuMs/r.gpuMs)
	}
	if r.ofMFU > 0 {
		mfu = fmt.Sprintf("%.1f%%", 100*r.ofMFU)
	}
	return fmt.Sprintf("%s\t%s\t%.2f\t%.0f tokens/s\t%s\t%s\t%s\t%.2g", r.name, r.shape, r.gpuMs, r.tokensPerS, mfu, cpu, x, r.diff)
}

func newModel(cfgPath string, d model.Device) *model.Model {
	cfg, err := model.LoadConfig(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m, err := model.New(cfg, d, model.LMHeadOutput)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m.InitRandom(1)
	return m
}

// trainStep times Forward(train) + Backward on a packed batch of T tokens.
func (l *lab) trainStep(cfgPath string, T int) modelRow {
	seqs := packed(T)
	tokens := make([]int32, T)
	for i := range tokens {
		tokens[i] = int32((i*7919 + 11) % 151000)
	}
	b := model.Batch{Tokens: tokens, Seqs: seqs}
	dlp := make([]float32, T)
	for i := range dlp {
		dlp[i] = -1 / float32(T)
	}
	step := func(m *model.Model) ([]float32, float64) {
		start := time.Now()
		out, err := m.Forward(b, true)
		if err == nil {
			err = m.Backward(dlp, nil, nil)
		}
		if err != nil {
			panic(err)
		}
		return out.LogProb, float64(time.Since(start).Microseconds()) / 1e3
	}
	g := newModel(cfgPath, l.gpu)
	r := modelRow{name: "train_step", shape: fmt.Sprintf("%s, %d tokens in seqs of ≤%d", cfgPath, T, seqLen)}
	gl, _ := step(g) // warm-up: kernels compile, buffers grow
	var best float64
	for range max(l.reps/4, 2) {
		_, ms := step(g)
		if best == 0 || ms < best {
			best = ms
		}
	}
	r.gpuMs = best
	r.tokensPerS = float64(T) / best * 1e3
	// 6·N FLOPs per token for the matmuls of forward and backward, plus
	// attention (forward 4·T²/2·HS·NH per layer, backward 2.5x that).
	cfg := g.Config
	flops := 6*float64(g.NumParams())*float64(T) +
		3.5*causalFlops(seqs, cfg.NumAttentionHeads, cfg.HeadDim())*float64(cfg.NumHiddenLayers)
	r.ofMFU = flops / best / 1e9 / l.gemmTFs
	if l.withCPU {
		c := newModel(cfgPath, l.cpu)
		cl, ms := step(c)
		r.cpuMs = ms
		r.diff = relDiff(gl, cl)
	}
	return r
}

// decodeStep times one Step of `slots` sequences, each one token, after a
// prefill of ctx tokens per sequence.
func (l *lab) decodeStep(cfgPath string, slots, ctx int) modelRow {
	run := func(m *model.Model) ([]float32, float64) {
		c := m.NewKVCache(slots, ctx+64)
		var pre []model.Chunk
		for s := 0; s < slots; s++ {
			toks := make([]int32, ctx)
			for i := range toks {
				toks[i] = int32((s*131 + i*17) % 151000)
			}
			pre = append(pre, model.Chunk{Slot: s, Tokens: toks})
		}
		if _, err := m.Step(c, pre); err != nil {
			panic(err)
		}
		var logits []float32
		var best float64
		for it := 0; it < 8; it++ {
			var dec []model.Chunk
			for s := 0; s < slots; s++ {
				dec = append(dec, model.Chunk{Slot: s, Tokens: []int32{int32((s + it) % 151000)}})
			}
			start := time.Now()
			out, err := m.Step(c, dec)
			if err != nil {
				panic(err)
			}
			ms := float64(time.Since(start).Microseconds()) / 1e3
			if it == 0 {
				logits = out
			}
			if best == 0 || ms < best {
				best = ms
			}
		}
		c.Free(m.Dev)
		return logits, best
	}
	r := modelRow{name: "decode_step", shape: fmt.Sprintf("%s, %d sequences at %d tokens", cfgPath, slots, ctx)}
	gl, ms := run(newModel(cfgPath, l.gpu))
	r.gpuMs, r.tokensPerS = ms, float64(slots)/ms*1e3
	if l.withCPU {
		cl, cms := run(newModel(cfgPath, l.cpu))
		r.cpuMs, r.diff = cms, relDiff(gl, cl)
	}
	return r
}
