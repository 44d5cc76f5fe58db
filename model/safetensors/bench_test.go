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

// memcpyPerOp times copying n float32 values, the floor any load must pay
// for touching the destination once; benchmarks report their time as a
// multiple of it, measured in the same run.
func memcpyPerOp(n int) time.Duration {
	src, dst := make([]float32, n), make([]float32, n)
	copy(dst, src) // fault the pages in first
	const reps = 5
	start := time.Now()
	for i := 0; i < reps; i++ {
		copy(dst, src)
	}
	return time.Since(start) / reps
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
// cache is warm), per stored dtype; x_memcpy is the time over a plain
// copy of the float32 result.
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
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := f.ReadF32("w", dst); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(memcpyPerOp(benchElems)), "x_memcpy")
		})
	}
}

// BenchmarkWrite streams float32 values into a file's encoding (to
// io.Discard, so the disk is not measured); x_memcpy as above.
func BenchmarkWrite(b *testing.B) {
	src := benchValues(benchElems)
	for _, d := range []DType{F32, BF16, F16} {
		b.Run(string(d), func(b *testing.B) {
			t := []Tensor{{Name: "w", DType: d, Shape: []int{benchElems}, F32: src}}
			b.SetBytes(int64(benchElems * 4))
			for i := 0; i < b.N; i++ {
				if _, err := Write(io.Discard, t, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(memcpyPerOp(benchElems)), "x_memcpy")
		})
	}
}
