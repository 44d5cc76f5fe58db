package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeHostOps times the small operations a batch-32 decode
// step of Qwen2.5-0.5B runs between its products, one call at a time, on
// the device's threads (-cpu sets them): the residual add (32 × 896), the
// q|k|v bias (32 × 1,152, bf16 as in a rollout copy), RoPE of q and of k
// (14 and 2 heads of 64), the norm, and SwiGLU (32 × 4,864; "swiglu32":
// a rollout copy's, in float32 arithmetic). Per call,
// as ns/op of each sub-benchmark; a step runs 48 adds, 24 biases, 24
// RoPEs of each kind, 49 norms and 24 SwiGLUs.
func BenchmarkDecodeHostOps(b *testing.B) {
	const rows, C, QKV, I, NH, KVH, HS = 32, 896, 1152, 4864, 14, 2, 64
	r := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) cpuBuf[float32] {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return cpuBuf[float32](x)
	}
	d := New().(*Device[float32])
	x, y, out := randn(rows*C), randn(rows*C), randn(rows*C)
	qkv, gu, act := randn(rows*QKV), randn(rows*2*I), randn(rows*I)
	bias := d.AllocBF16(QKV)
	d.Upload(bias, randn(QKV))
	g, rstd := randn(C), randn(rows)
	pos := make([]int32, rows)
	for i := range pos {
		pos[i] = int32(64 + 3*i)
	}
	b.Run("add", func(b *testing.B) {
		for b.Loop() {
			d.Add(out, x, y)
		}
	})
	b.Run("bias", func(b *testing.B) {
		for b.Loop() {
			d.AddBias(qkv, QKV, bias, rows, QKV)
		}
	})
	b.Run("rope-q", func(b *testing.B) {
		for b.Loop() {
			d.RoPE(qkv, QKV, 0, pos, NH, HS, 1e6)
		}
	})
	b.Run("rope-k", func(b *testing.B) {
		for b.Loop() {
			d.RoPE(qkv, QKV, NH*HS, pos, KVH, HS, 1e6)
		}
	})
	b.Run("norm", func(b *testing.B) {
		for b.Loop() {
			d.RMSNorm(out, nil, rstd, x, nil, g, rows, C, 1e-6)
		}
	})
	b.Run("swiglu", func(b *testing.B) {
		for b.Loop() {
			d.SwiGLU(act, gu, rows, I)
		}
	})
	b.Run("swiglu32", func(b *testing.B) { // a rollout copy's
		for b.Loop() {
			d.SwiGLU32(act, gu, rows, I)
		}
	})
}
