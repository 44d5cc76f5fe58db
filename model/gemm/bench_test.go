package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
