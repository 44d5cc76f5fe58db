package gemm

import (
	"fmt"
	"testing"
)

func BenchmarkTmpScale(b *testing.B) {
	for _, n := range []int{512, 2048, 9728} {
		k := 896
		b16 := make([]uint16, n*k)
		for i := range b16 {
			b16[i] = uint16(0x3c00 + i%97)
		}
		a := make([]float32, 32*k)
		for i := range a {
			a[i] = float32(i%13) * 0.1
		}
		c := make([]float32, 32*n)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("n%d/t%d", n, th), func(b *testing.B) {
				for b.Loop() {
					SgemmDotBF16TransB(32, n, k, 1, a, k, b16, k, 0, c, n, th)
				}
				b.ReportMetric(2*float64(32*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
