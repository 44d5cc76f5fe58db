package model

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkAttentionCached05B times one layer of a decode step's attention
// over the KV cache at Qwen2.5-0.5B's shapes (14 heads of 64, 2 KV heads)
// for 32 sequences at position 192 (the middle of the step section's
// 64 + 256 tokens; the step runs it 24 times), on one thread, alternating
// the vector kernels and the element-by-element loops in the same loop. It
// reports ms of each and their ratio (vector/scalar).
func BenchmarkAttentionCached05B(b *testing.B) {
	d := &CPU[float32]{threads: 1}
	rng := rand.New(rand.NewPCG(3, 3))
	const slots, maxLen, NH, KVH, HS, at = 32, 320, 14, 2, 64, 192
	W := (NH + 2*KVH) * HS
	qkv := cpuBuf[float32](randF32(rng, slots*W, 1))
	K, V := cpuBuf[float32](randF32(rng, slots*maxLen*KVH*HS, 1)), cpuBuf[float32](randF32(rng, slots*maxLen*KVH*HS, 1))
	out := make(cpuBuf[float32], slots*NH*HS)
	sl, pos, lens := make([]int32, slots), make([]int32, slots), make([]int32, slots)
	for s := range sl {
		sl[s], pos[s], lens[s] = int32(s), at, 1
	}
	defer func() { attnNoVector = false }()
	var tv, ts time.Duration
	for b.Loop() {
		t0 := time.Now()
		attnNoVector = false
		d.AttentionCached(out, qkv, K, V, sl, pos, lens, maxLen, NH, KVH, HS)
		t1 := time.Now()
		attnNoVector = true
		d.AttentionCached(out, qkv, K, V, sl, pos, lens, maxLen, NH, KVH, HS)
		tv += t1.Sub(t0)
		ts += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(tv.Seconds()*1e3/n, "ms-vector")
	b.ReportMetric(ts.Seconds()*1e3/n, "ms-scalar")
	b.ReportMetric(tv.Seconds()/ts.Seconds(), "vector/scalar")
}
