package main

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
)

// The tensor-core attention (bf16 q|k|v, the storage mixed-precision
// training uses) on the heads of Qwen2.5-0.5B and 1.5B, one row of -tokens
// and rows of 1024, each forward tile shape and both backwards, against the
// same run's cuBLAS bf16 GEMM rate; then one validation against the CPU
// device at -tc-validate tokens. Work is counted as flash attention counts
// it: 4·HS FLOPs per (query, visible key) pair and head forward, 2.5 times
// that backward (five products to the forward's two).

type tcHeads struct {
	name        string
	NH, KVH, HS int
}

var tcConfigs = []tcHeads{{"0.5B", 14, 2, 64}, {"1.5B", 12, 2, 128}}

// tcInputs is one attention problem on the GPU in bf16.
type tcInputs struct {
	h             tcHeads
	seqs          []int32
	T, W          int
	qkv, out      cuda.Buffer
	lse, dy, dqkv model.Buffer
}

func newTCInputs(g *cuda.Device, h tcHeads, seqs []int32, seed uint64) *tcInputs {
	T := int(seqs[len(seqs)-1])
	in := &tcInputs{h: h, seqs: seqs, T: T, W: (h.NH + 2*h.KVH) * h.HS}
	in.qkv = g.AllocType(T*in.W, cuda.BF16)
	fill(g, in.qkv, seed, 1)
	in.out = g.AllocType(T*h.NH*h.HS, cuda.BF16)
	in.lse = g.Alloc(h.NH * T)
	in.dy = randBuf(g, T*h.NH*h.HS, seed+1, 1)
	in.dqkv = g.Alloc(T * in.W)
	return in
}

func (in *tcInputs) forward(g *cuda.Device) {
	g.Attention(in.out, in.lse, in.qkv, in.seqs, in.h.NH, in.h.KVH, in.h.HS)
}

func (in *tcInputs) backward(g *cuda.Device) {
	g.AttentionBackward(in.dqkv, in.dy, in.out, in.lse, in.qkv, in.seqs, in.h.NH, in.h.KVH, in.h.HS)
}

func (in *tcInputs) free(g *cuda.Device) {
	for _, b := range []model.Buffer{in.qkv, in.out, in.lse, in.dy, in.dqkv} {
		g.Free(b)
	}
}

// bf16Ceiling is cuBLAS's rate on an n³ product of bf16 matrices into
// float32, the denominator of the tensor-core rows.
func (l *lab) bf16Ceiling(n int) float64 {
	a, b := l.gpu.AllocType(n*n, cuda.BF16), l.gpu.AllocType(n*n, cuda.BF16)
	c := l.gpu.Alloc(n * n)
	defer func() { l.gpu.Free(a); l.gpu.Free(b); l.gpu.Free(c) }()
	fill(l.gpu, a, 1, 0.01)
	fill(l.gpu, b, 2, 0.01)
	ms := timeIt(l.gpu, func() { l.gpu.Gemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n) }, max(l.reps/2, 5))
	return 2 * math.Pow(float64(n), 3) / ms / 1e9
}

// tensorCoreAttention prints the section's table to w and returns the
// validation's largest relative L2 error (0 without one).
func (l *lab) tensorCoreAttention(w io.Writer, T, gemmN, mmaIters, validateT int) (worst float64) {
	ceil := l.bf16Ceiling(gemmN)
	mma, err := l.gpu.MMAPeak(mmaIters, max(l.reps/4, 1))
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(w, "tensor-core attention: ceilings (same run) cuBLAS bf16 GEMM %d³ %.1f TFLOP/s, mma.sync chains %.1f TFLOP/s (%.2f of it)\n",
		gemmN, ceil, mma, mma/ceil)
	fmt.Fprintf(w, "%-6s %-14s %-26s %9s %9s %7s\n", "heads", "layout", "kernel", "GPU ms", "TFLOP/s", "of ceil")
	g := l.gpu
	for _, h := range tcConfigs {
		layouts := []struct {
			name string
			seqs []int32
		}{{fmt.Sprintf("1 × %d", T), []int32{0, int32(T)}}, {fmt.Sprintf("%d × %d", ceilDiv(T, seqLen), min(T, seqLen)), packed(T)}}
		for _, lay := range layouts {
			in := newTCInputs(g, h, lay.seqs, 21)
			fl := causalFlops(lay.seqs, h.NH, h.HS)
			row := func(kernel string, ms, flops float64) {
				tf := flops / ms / 1e9
				fmt.Fprintf(w, "%-6s %-14s %-26s %9.3f %9.1f %7.3f\n", h.name, lay.name, kernel, ms, tf, tf/ceil)
			}
			for _, shape := range cuda.AttentionForwardShapes(h.HS) {
				g.SetAttentionForward(shape)
				name := "forward"
				if shape != "" {
					name += " " + shape
				}
				row(name, timeIt(g, func() { in.forward(g) }, l.reps), fl)
			}
			g.SetAttentionForward("")
			in.forward(g)
			for _, shape := range cuda.AttentionBackwardShapes(h.HS) {
				g.SetAttentionBackward(shape)
				name := "backward (atomic)"
				if shape != "" {
					name = "backward " + shape + " (atomic)"
				}
				row(name, timeIt(g, func() { in.backward(g) }, l.reps), 2.5*fl)
			}
			g.SetAttentionBackward("")
			g.SetDeterministic(true)
			row("backward (deterministic)", timeIt(g, func() { in.backward(g) }, l.reps), 2.5*fl)
			g.SetDeterministic(false)
			in.free(g)
		}
		if validateT > 0 {
			report, e := l.validateTC(h, validateT)
			worst = math.Max(worst, e)
			fmt.Fprintf(w, "%-6s validation at %d tokens (rows of ≤%d) against the CPU device in float32: %s\n", h.name, validateT, seqLen, report)
		}
	}
	return worst
}

// validateTC runs the forward and every backward at T tokens on both
// devices (the CPU fed the GPU's bf16 values) and reports relative L2
// errors, and the largest of them.
func (l *lab) validateTC(h tcHeads, T int) (string, float64) {
	g, c := l.gpu, l.cpu
	seqs := packed(T)
	in := newTCInputs(g, h, seqs, 31)
	defer in.free(g)
	t0 := time.Now()
	in.forward(g)
	cqkv := upload(c, download(g, in.qkv))
	co, cl := c.Alloc(T*h.NH*h.HS), c.Alloc(h.NH*T)
	c.Attention(co, cl, cqkv, seqs, h.NH, h.KVH, h.HS)
	eo, el := relL2(download(g, in.out), download(c, co)), relL2(download(g, in.lse), download(c, cl))
	worst := math.Max(eo, el)
	out := fmt.Sprintf("out %.2e, lse %.2e", eo, el)
	// The backwards read the GPU's output and lse, as training does.
	cob, clse, cdy := upload(c, download(g, in.out)), upload(c, download(g, in.lse)), upload(c, download(g, in.dy))
	cdq := c.Alloc(T * in.W)
	c.AttentionBackward(cdq, cdy, cob, clse, cqkv, seqs, h.NH, h.KVH, h.HS)
	want := download(c, cdq)
	for _, shape := range append(cuda.AttentionBackwardShapes(h.HS), "deterministic") {
		g.SetDeterministic(shape == "deterministic")
		g.SetAttentionBackward(shape)
		in.backward(g)
		g.SetDeterministic(false)
		g.SetAttentionBackward("")
		e := relL2(download(g, in.dqkv), want)
		worst = math.Max(worst, e)
		out += fmt.Sprintf(", dqkv (%q) %.2e", shape, e)
	}
	return out + fmt.Sprintf(" (%.1f s)", time.Since(t0).Seconds()), worst
}

func upload(d model.Device, x []float32) model.Buffer {
	b := d.Alloc(len(x))
	d.Upload(b, x)
	return b
}

// relL2 is ‖a − b‖ / ‖b‖ (+Inf when a has a NaN or an infinity).
func relL2(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return math.Inf(1)
		}
		num += (x - y) * (x - y)
		den += y * y
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
