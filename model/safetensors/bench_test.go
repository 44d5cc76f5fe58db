package safetensors

import (
	"io"
	"math/rand"
	"path/filepath"
	"testing"
	"time"
)

// benchElems is 16M elements: a 7B model's MLP matrix is 68M.
const benchElems = 1 << 24

// minRatio runs op b.N times, each run next to a plain copy of n float32
// values (the floor any load or save pays for touching its data once), and
// reports the fastest op over the fastest copy as x_memcpy. Minima over
// interleaved runs keep the ratio steady on a shared, loaded machine.
func minRatio(b *testing.B, n int, op func()) {
	src, dst := make([]float32, n), make([]float32, n)
	copy(dst, src) // fault the pages in
	best, bestCopy := time.Duration(1<<62), time.Duration(1<<62)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		op()
		best = min(best, time.Since(start))
		b.StopTimer()
		start = time.Now()
		copy(dst, src)
		bestCopy = min(bestCopy, time.Since(start))
		b.StartTimer()
	}
	b.ReportMetric(float64(best)/float64(bestCopy), "x_memcpy")
	b.ReportMetric(float64(best.Nanoseconds())/float64(n), "best_ns/value")
}

func benchValues(n int) []float32 {
	rng := rand.New(rand.NewSource(1))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// BenchmarkReadF32 loads a tensor from a mapped file into float32 (the page
// cache is warm), per stored dtype.
func BenchmarkReadF32(b *testing.B) {
	src := benchValues(benchElems)
	for _, d := range []DType{F32, BF16, F16} {
		b.Run(string(d), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "b.safetensors")
			if err := WriteFile(path, []Tensor{{Name: "w", DType: d, Shape: []int{benchElems}, F32: src}}, nil); err != nil {
				b.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			dst := make([]float32, benchElems)
			f.ReadF32("w", dst)
			b.SetBytes(int64(benchElems * 4))
			minRatio(b, benchElems, func() {
				if err := f.ReadF32("w", dst); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkWrite streams float32 values into a file's encoding (to
// io.Discard, so the disk is not measured).
func BenchmarkWrite(b *testing.B) {
	src := benchValues(benchElems)
	for _, d := range []DType{F32, BF16, F16} {
		b.Run(string(d), func(b *testing.B) {
			t := []Tensor{{Name: "w", DType: d, Shape: []int{benchElems}, F32: src}}
			b.SetBytes(int64(benchElems * 4))
			minRatio(b, benchElems, func() {
				if _, err := Write(io.Discard, t, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
