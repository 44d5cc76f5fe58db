package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/r1go/r1go/model/gemm"
)

// matmulShape is one product the policy model runs: forward projections are
// X·Wᵀ (NT, weights stored out×in as in the checkpoint), the input gradient
// is dY·W (NN) and the weight gradient dYᵀ·X (TN).
type matmulShape struct {
	name           string
	transA, transB bool
	m, n, k        int
}

func (s matmulShape) form() string {
	f := func(t bool) string {
		if t {
			return "T"
		}
		return "N"
	}
	return f(s.transA) + f(s.transB)
}

func (s matmulShape) flops() float64 { return 2 * float64(s.m) * float64(s.n) * float64(s.k) }

// Shapes from the small Qwen2 configs the trainer uses on a CPU (hidden
// 256/512/896, T = 2048..4096 tokens per step, intermediate 4864 as in
// Qwen2.5-0.5B, 2 KV heads of 64) and a cube for comparison with other
// reports.
var matmulShapes = []matmulShape{
	{"q/o proj fwd T4096 d512", false, true, 4096, 512, 512},
	{"kv proj fwd T2048 d896", false, true, 2048, 128, 896},
	{"gate/up fwd T2048 d896", false, true, 2048, 4864, 896},
	{"down fwd T2048 d896", false, true, 2048, 896, 4864},
	{"down bwd dX T2048 d896", false, false, 2048, 4864, 896},
	{"q proj bwd dW T2048 d896", true, false, 896, 896, 2048},
	{"gate/up bwd dW T2048 d896", true, false, 4864, 896, 2048},
	{"lm head fwd T2048 d256 V32k", false, true, 2048, 32768, 256},
	{"cube 1024", false, false, 1024, 1024, 1024},
}

// matmulSection times gemm.Sgemm with every vector kernel and OpenBLAS on
// the same inputs, and divides by the same-run FMA peak (best ISA, and the
// kernel's own ISA when that differs) and by OpenBLAS.
func matmulSection(e *env) []row {
	var rows []row
	blas, err := loadOpenBLAS()
	if err != nil {
		r := row{section: "matmul", name: "OpenBLAS not found", note: err.Error()}
		fmt.Println(r)
		rows = append(rows, r)
	} else {
		blas.setThreads(int32(e.threads))
		fmt.Printf("matmul   OpenBLAS from %s, %d threads\n", blas.path, e.threads)
	}
	best := e.fmaPeak(bestVectorISA())
	var engines []*gemm.Engine
	for _, name := range gemm.Kernels() {
		if name == "generic" && len(gemm.Kernels()) > 1 {
			continue // a portability fallback, far from the peak by design
		}
		eng, err := gemm.NewEngine(name, e.threads)
		if err != nil {
			panic(err)
		}
		engines = append(engines, eng)
		e.fmaPeak(kernelISA(name))
	}

	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range matmulShapes {
		rowsA, colsA := s.m, s.k
		if s.transA {
			rowsA, colsA = s.k, s.m
		}
		rowsB, colsB := s.k, s.n
		if s.transB {
			rowsB, colsB = s.n, s.k
		}
		a, b := randoms(rng, rowsA*colsA), randoms(rng, rowsB*colsB)
		c := make([]float32, s.m*s.n)
		ref := make([]float32, s.m*s.n)
		label := fmt.Sprintf("%s %s %dx%dx%d", s.name, s.form(), s.m, s.n, s.k)

		var blasSec float64
		if blas != nil {
			blasSec = timeCall(e.reps, func() { blas.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, colsA, b, colsB, 0, ref, s.n) })
		}
		for _, eng := range engines {
			sec := timeCall(e.reps, func() { eng.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, colsA, b, colsB, 0, c, s.n) })
			g := s.flops() / sec / 1e9
			r := row{section: "matmul", name: label + " " + eng.Kernel(), value: g, unit: "GFLOP/s",
				ratios: []ratio{{"peak", g / best}}}
			if isa := kernelISA(eng.Kernel()); isa != bestVectorISA() {
				r.ratios = append(r.ratios, ratio{isa + " peak", g / e.fmaPeak(isa)})
			}
			if blas != nil {
				r.ratios = append(r.ratios, ratio{"OpenBLAS", blasSec / sec})
				r.note = fmt.Sprintf("OpenBLAS %.1f GFLOP/s, max rel diff %.1e", s.flops()/blasSec/1e9, maxRelDiff(c, ref))
			}
			fmt.Println(r)
			rows = append(rows, r)
		}
	}
	return rows
}

// kernelISA maps a gemm kernel to the probe loop with the same instructions.
func kernelISA(kernel string) string {
	switch kernel {
	case "avx512", "avx2":
		return kernel
	}
	return "go"
}

func bestVectorISA() string { return kernelISA(gemm.Kernels()[0]) }

func randoms(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}

// timeCall returns the best seconds per call over reps timings, each of
// enough calls to last at least 0.2 s, after one untimed warm-up call.
func timeCall(reps int, f func()) float64 {
	t0 := time.Now()
	f()
	n := max(1, int(0.2/max(time.Since(t0).Seconds(), 1e-6)))
	best := math.Inf(1)
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			f()
		}
		best = min(best, time.Since(t0).Seconds()/float64(n))
	}
	return best
}

// maxRelDiff is max |x−y| ÷ max |y|: a cross-check that both libraries
// computed the same product.
func maxRelDiff(x, y []float32) float64 {
	var d, m float64
	for i := range x {
		d = max(d, math.Abs(float64(x[i])-float64(y[i])))
		m = max(m, math.Abs(float64(y[i])))
	}
	return d / max(m, 1e-30)
}
