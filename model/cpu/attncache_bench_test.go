package cpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/r1go/r1go/model"
)

// BenchmarkAttentionCached05B times one layer of a decode step's attention
// over the KV cache at Qwen2.5-0.5B's shapes (14 heads of 64, 2 KV heads)
// for 32 sequences at position 192 (the middle of the step section's
// 64 + 256 tokens; the step runs it 24 times), on one thread, alternating
// the vector kernels and the element-by-element loops in the same loop. It
// reports ms of each and their ratio (vector/scalar).
func BenchmarkAttentionCached05B(b *testing.B) {
	d := &Device[float32]{threads: 1}
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
		d.AttentionCached(out, qkv, nil, K, V, sl, pos, lens, maxLen, NH, KVH, HS, 0)
		t1 := time.Now()
		attnNoVector = true
		d.AttentionCached(out, qkv, nil, K, V, sl, pos, lens, maxLen, NH, KVH, HS, 0)
		tv += t1.Sub(t0)
		ts += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(tv.Seconds()*1e3/n, "ms-vector")
	b.ReportMetric(ts.Seconds()*1e3/n, "ms-scalar")
	b.ReportMetric(tv.Seconds()/ts.Seconds(), "vector/scalar")
}

// BenchmarkAttentionDecodeStep05B times the attention of a whole decode
// step at Qwen2.5-0.5B's shapes: 24 layers, each with its own KV cache
// (32 sequences at position 128, the middle of the rollout section's
// 64 + 128 tokens), on GOMAXPROCS threads, so the keys and values come
// from memory as in a rollout (24 layers × 2 × 32 × 129 × 512 bytes,
// about 100 MB in float32, read once a step). In the same loop: the same
// step on one layer's cache 24 times (in cache once warm: their ratio is
// what memory costs the kernels), and on a bf16 cache (a rollout copy's,
// half the bytes, float32 sums). It reports ms a step of each, the float32
// cache's read rate (GB/s), the bf16 cache's time ÷ the float32's, and
// the ms a step, over all three, that the loops' callers waited at their
// ends (pool.TimeJoins).
func BenchmarkAttentionDecodeStep05B(b *testing.B) {
	d := New().(*Device[float32])
	rng := rand.New(rand.NewPCG(3, 5))
	const layers, slots, maxLen, NH, KVH, HS, at = 24, 32, 192, 14, 2, 64, 128
	W := (NH + 2*KVH) * HS
	qkv := cpuBuf[float32](randF32(rng, slots*W, 1))
	K, V := make([]model.Buffer, layers), make([]model.Buffer, layers)
	K16, V16 := make([]model.Buffer, layers), make([]model.Buffer, layers)
	for l := range K {
		K[l], V[l] = cpuBuf[float32](randF32(rng, slots*maxLen*KVH*HS, 1)), cpuBuf[float32](randF32(rng, slots*maxLen*KVH*HS, 1))
		K16[l], V16[l] = d.AllocBF16(K[l].Len()), d.AllocBF16(V[l].Len())
		d.Copy(K16[l], K[l])
		d.Copy(V16[l], V[l])
	}
	out := make(cpuBuf[float32], slots*NH*HS)
	sl, pos, lens := make([]int32, slots), make([]int32, slots), make([]int32, slots)
	for s := range sl {
		sl[s], pos[s], lens[s] = int32(s), at, 1
	}
	step := func(K, V []model.Buffer, layer func(int) int) time.Duration {
		t0 := time.Now()
		for l := range layers {
			d.AttentionCached(out, qkv, nil, K[layer(l)], V[layer(l)], sl, pos, lens, maxLen, NH, KVH, HS, 0)
		}
		return time.Since(t0)
	}
	each, first := func(l int) int { return l }, func(int) int { return 0 }
	var tm, tc, th time.Duration
	ops := TimeOps(d, true)
	defer TimeOps(d, false)
	for b.Loop() {
		tm += step(K, V, each)
		tc += step(K, V, first)
		th += step(K16, V16, each)
	}
	n := float64(b.N)
	kvBytes := float64(layers * 2 * slots * (at + 1) * KVH * HS * 4)
	b.ReportMetric(tm.Seconds()*1e3/n, "ms-memory")
	b.ReportMetric(tc.Seconds()*1e3/n, "ms-cache")
	b.ReportMetric(th.Seconds()*1e3/n, "ms-bf16")
	b.ReportMetric(kvBytes*n/tm.Seconds()/1e9, "GB/s")
	b.ReportMetric(th.Seconds()/tm.Seconds(), "bf16/f32")
	b.ReportMetric(ops.JoinWait().Seconds()*1e3/n/3, "ms-waits")
}
