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
