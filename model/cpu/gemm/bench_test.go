package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkSgemm reports GFLOP/s for each kernel at a few of the policy
// model's shapes (tokens × hidden × hidden and the gate/up projection) and a
// cube. The ratio to the machine's peak is computed by benchmarks/cpu.
func BenchmarkSgemm(b *testing.B) {
	cases := []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{
		{"cube1024_NN", false, false, 1024, 1024, 1024},
		{"qproj2048x896x896_NT", false, true, 2048, 896, 896},
		{"up2048x4864x896_NT", false, true, 2048, 4864, 896},
		{"dW896x896x2048_TN", true, false, 896, 896, 2048},
		{"dX2048x896x4864_NN", false, false, 2048, 896, 4864},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range Kernels() {
		e, _ := NewEngine(name, 0)
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/%s", name, c.name), func(b *testing.B) {
				if name == "generic" && testing.Short() {
					b.Skip("slow")
				}
				a := make([]float32, c.m*c.k)
				bb := make([]float32, c.k*c.n)
				cc := make([]float32, c.m*c.n)
				for i := range a {
					a[i] = rng.Float32()
				}
				for i := range bb {
					bb[i] = rng.Float32()
				}
				lda, ldb := c.k, c.n
				if c.transA {
					lda = c.m
				}
				if c.transB {
					ldb = c.k
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.Sgemm(c.transA, c.transB, c.m, c.n, c.k, 1, a, lda, bb, ldb, 0, cc, c.n)
				}
				b.ReportMetric(2*float64(c.m)*float64(c.n)*float64(c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkForEach is the fork-join cost the driver pays twice per packed
// block (pack, then multiply): goroutines started per call, not a pool.
func BenchmarkForEach(b *testing.B) {
	var sink [64]int
	for i := 0; i < b.N; i++ {
		forEach(2, 2, func(t int) { sink[t*32]++ })
	}
}

// BenchmarkSgemmStridedBatched is attention-shaped: 14 heads of
// T×T×64 scores (NT) and T×64×T context (NN), T = 512.
func BenchmarkSgemmStridedBatched(b *testing.B) {
	const heads, t, hd = 14, 512, 64
	rng := rand.New(rand.NewPCG(9, 9))
	q, k, s := make([]float32, heads*t*hd), make([]float32, heads*t*hd), make([]float32, heads*t*t)
	for i := range q {
		q[i], k[i] = rng.Float32(), rng.Float32()
	}
	o := make([]float32, heads*t*hd)
	flops := 2 * float64(heads) * t * t * hd
	b.Run("scores_NT", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			SgemmStridedBatched(false, true, t, t, hd, 1, q, hd, t*hd, k, hd, t*hd, 0, s, t, t*t, heads)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("context_NN", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			SgemmStridedBatched(false, false, t, hd, t, 1, s, t, t*t, k, hd, t*hd, 0, o, hd, t*hd, heads)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// decodeShapes are the batch-1 projections of the 27M-parameter benchmark
// model (hidden 512, 8 heads of 64, 2 KV heads, MLP 1408, vocabulary 8192):
// n output rows of B, k floats each.
var decodeShapes = []struct {
	name string
	n, k int
}{
	{"kv128x512", 128, 512},
	{"qo512x512", 512, 512},
	{"gateup1408x512", 1408, 512},
	{"down512x1408", 512, 1408},
	{"lmhead8192x512", 8192, 512},
}

// decodeCopies returns enough copies of an n×k matrix to exceed the last
// level cache (128 MiB in all), as decode reads every weight once a token.
func decodeCopies(rng *rand.Rand, n, k int) [][]float32 {
	copies := max(1, (128<<20)/(4*n*k))
	ws := make([][]float32, copies)
	for c := range ws {
		ws[c] = make([]float32, n*k)
		for i := range ws[c] {
			ws[c][i] = rng.Float32()*2 - 1
		}
	}
	return ws
}

// BenchmarkDotOneRow compares, on one thread and in the same loop, the
// two-row dot kernel fed the one row twice (what m = 1 ran before) with the
// one-row kernel, sweeping all rows of a decode-shaped B streamed from
// memory. It reports GB/s of B for each and their ratio (one/pair).
func BenchmarkDotOneRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, kern := range kernels {
		if kern.dot1 == nil {
			continue
		}
		for _, s := range decodeShapes {
			b.Run(kern.name+"/"+s.name, func(b *testing.B) {
				ws := decodeCopies(rng, s.n, s.k)
				a := make([]float32, s.k)
				for i := range a {
					a[i] = rng.Float32()
				}
				kv := s.k / kern.dotStep * kern.dotStep
				var out [8]float32
				var o1 [4]float32
				var pair, one time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					w := ws[i%len(ws)]
					t0 := time.Now()
					for r := 0; r+4 <= s.n; r += 4 {
						kern.dot(kv, &a[0], &a[0], &w[r*s.k], uintptr(s.k)*4, &out)
					}
					t1 := time.Now()
					w = ws[(i+len(ws)/2)%len(ws)]
					for r := 0; r+4 <= s.n; r += 4 {
						kern.dot1(kv, &a[0], &w[r*s.k], uintptr(s.k)*4, &o1)
					}
					t2 := time.Now()
					pair += t1.Sub(t0)
					one += t2.Sub(t1)
				}
				bytes := 4 * float64(s.n) * float64(kv) * float64(b.N)
				b.ReportMetric(bytes/pair.Seconds()/1e9, "GB/s-pair")
				b.ReportMetric(bytes/one.Seconds()/1e9, "GB/s-one")
				b.ReportMetric(pair.Seconds()/one.Seconds(), "one/pair")
			})
		}
	}
}

// BenchmarkSgemmDecode is the whole batch-1 product x·Wᵀ through the
// engine (few-rows path, threads by operand size) at the decode shapes,
// with B streamed from memory; GB/s of B.
func BenchmarkSgemmDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, name := range Kernels() {
		e, _ := NewEngine(name, 0)
		for _, s := range decodeShapes {
			b.Run(name+"/"+s.name, func(b *testing.B) {
				if name == "generic" && testing.Short() {
					b.Skip("slow")
				}
				ws := decodeCopies(rng, s.n, s.k)
				a := make([]float32, s.k)
				c := make([]float32, s.n)
				for i := range a {
					a[i] = rng.Float32()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.Sgemm(false, true, 1, s.n, s.k, 1, a, s.k, ws[i%len(ws)], s.k, 0, c, s.n)
				}
				b.ReportMetric(4*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
