package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// matmulShape is one product the policy model runs: forward projections are
// X·Wᵀ (NT, weights stored out×in as in the checkpoint), the input gradient
// is dY·W (NN) and the weight gradient dYᵀ·X (TN).
type matmulShape struct {
	name           string
	transA, transB bool
	m, n, k        int
	// streaming marks a product bound by reading B from memory (a few rows
	// of A against a B larger than the last-level cache): it is reported in
	// GB/s of B against the read-bandwidth probe instead of the FMA peak.
	streaming bool
	// batch > 1 runs that many independent products (attention heads)
	// through gemm.SgemmStridedBatched, and through one cblas_sgemm call
	// per head for OpenBLAS.
	batch int
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

func (s matmulShape) flops() float64 {
	return 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(max(1, s.batch))
}

// Shapes from the small Qwen2 configs the trainer uses on a CPU (hidden
// 256/512/896, T = 2048..4096 tokens per step, intermediate 4864 as in
// Qwen2.5-0.5B, 2 KV heads of 64) and a cube for comparison with other
// reports.
var matmulShapes = []matmulShape{
	{"q/o proj fwd T4096 d512", false, true, 4096, 512, 512, false, 0},
	{"kv proj fwd T2048 d896", false, true, 2048, 128, 896, false, 0},
	{"gate/up fwd T2048 d896", false, true, 2048, 4864, 896, false, 0},
	{"down fwd T2048 d896", false, true, 2048, 896, 4864, false, 0},
	{"down bwd dX T2048 d896", false, false, 2048, 4864, 896, false, 0},
	{"q proj bwd dW T2048 d896", true, false, 896, 896, 2048, false, 0},
	{"gate/up bwd dW T2048 d896", true, false, 4864, 896, 2048, false, 0},
	{"lm head fwd T2048 d256 V32k", false, true, 2048, 32768, 256, false, 0},
	{"attn scores 14 heads T512 hd64", false, true, 512, 512, 64, false, 14},
	{"attn context 14 heads T512 hd64", false, false, 512, 64, 512, false, 14},
	{"cube 1024", false, false, 1024, 1024, 1024, false, 0},
	{"decode lm head 1 token d896 V32k", false, true, 1, 32768, 896, true, 0},
	{"decode lm head 4 tokens d896 V32k", false, true, 4, 32768, 896, true, 0},
}

// matmulSection times gemm.Sgemm with every vector kernel and OpenBLAS on
// the same inputs, interleaved rep by rep, and divides by the FMA peak
// probed between the reps (the best seen in the run) and by OpenBLAS.
//
// Each figure is given twice. GFLOP/s is over wall-clock time: the real
// speed, but on a shared machine it drops whenever other processes take
// turns on the cores. GFLOP/core-s is over the CPU time the process used
// (all threads, OpenBLAS's included): the speed per core while the work ran,
// which stays comparable under load.
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
	}

	type result struct {
		shape  matmulShape
		kernel string
		ours   timing
		blas   timing
		diff   float64
	}
	var results []result
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range matmulShapes {
		if !e.match.MatchString(s.name) {
			continue
		}
		rowsA, colsA := s.m, s.k
		if s.transA {
			rowsA, colsA = s.k, s.m
		}
		rowsB, colsB := s.k, s.n
		if s.transB {
			rowsB, colsB = s.n, s.k
		}
		batch := max(1, s.batch)
		a, b := randoms(rng, batch*rowsA*colsA), randoms(rng, batch*rowsB*colsB)
		c := make([]float32, batch*s.m*s.n)
		ref := make([]float32, batch*s.m*s.n)
		ours1 := func(eng *gemm.Engine) {
			eng.SgemmStridedBatched(s.transA, s.transB, s.m, s.n, s.k, 1, a, colsA, rowsA*colsA, b, colsB, rowsB*colsB, 0, c, s.n, s.m*s.n, batch)
		}
		theirs1 := func() {
			for h := 0; h < batch; h++ {
				blas.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, a[h*rowsA*colsA:], colsA, b[h*rowsB*colsB:], colsB, 0, ref[h*s.m*s.n:], s.n)
			}
		}
		ours := make([]timing, len(engines))
		var theirs timing
		for r := 0; r < e.reps; r++ {
			for _, eng := range engines {
				e.probePeaks(kernelISA(eng.Kernel()))
			}
			for i, eng := range engines {
				ours[i] = ours[i].best(timeCall(func() { ours1(eng) }))
			}
			if blas != nil {
				theirs = theirs.best(timeCall(theirs1))
				// OpenBLAS's idle threads spin for a while after a call;
				// let them settle before timing our code again.
				time.Sleep(150 * time.Millisecond)
			}
		}
		for i, eng := range engines {
			res := result{shape: s, kernel: eng.Kernel(), ours: ours[i], blas: theirs}
			if blas != nil {
				ours1(eng)
				res.diff = maxRelDiff(c, ref)
			}
			results = append(results, res)
		}
	}

	// Ratios use the best peak of the whole run, known only now.
	for _, res := range results {
		s := res.shape
		label := fmt.Sprintf("%s %s %dx%dx%d %s", s.name, s.form(), s.m, s.n, s.k, res.kernel)
		if s.batch > 1 {
			label = fmt.Sprintf("%s %s %d×%dx%dx%d %s", s.name, s.form(), s.batch, s.m, s.n, s.k, res.kernel)
		}
		if s.streaming {
			rows = append(rows, streamingRows(e, res.ours, res.blas, s, label, res.diff)...)
			continue
		}
		isa := kernelISA(res.kernel)
		best := e.peak[bestVectorISA()]
		wall := s.flops() / res.ours.wall / 1e9
		rw := row{section: "matmul", name: label, value: wall, unit: "GFLOP/s",
			ratios: []ratio{{"peak", wall / best.Wall}}}
		core := row{section: "matmul", name: label, unit: "GFLOP/core-s"}
		if res.ours.cpu > 0 {
			core.value = s.flops() / res.ours.cpu / 1e9
			core.ratios = []ratio{{"core peak", core.value / best.PerCore}}
		}
		if isa != bestVectorISA() {
			rw.ratios = append(rw.ratios, ratio{isa + " peak", wall / e.peak[isa].Wall})
			if res.ours.cpu > 0 {
				core.ratios = append(core.ratios, ratio{isa + " core peak", core.value / e.peak[isa].PerCore})
			}
		}
		if res.blas.wall > 0 {
			rw.ratios = append(rw.ratios, ratio{"OpenBLAS", res.blas.wall / res.ours.wall})
			rw.note = fmt.Sprintf("OpenBLAS %.1f GFLOP/s, max rel diff %.1e", s.flops()/res.blas.wall/1e9, res.diff)
			if res.ours.cpu > 0 && res.blas.cpu > 0 {
				core.ratios = append(core.ratios, ratio{"OpenBLAS", res.blas.cpu / res.ours.cpu})
				core.note = fmt.Sprintf("OpenBLAS %.1f GFLOP/core-s", s.flops()/res.blas.cpu/1e9)
			}
		}
		fmt.Println(rw)
		rows = append(rows, rw)
		if res.ours.cpu > 0 {
			fmt.Println(core)
			rows = append(rows, core)
		}
	}
	for _, isa := range []string{bestVectorISA(), "avx2"} {
		if p, ok := e.peak[isa]; ok {
			r := row{section: "matmul", name: "FMA peak " + isa + fmt.Sprintf(" (%d threads, best probe)", e.threads),
				value: p.Wall, unit: "GFLOP/s", note: fmt.Sprintf("%.1f GFLOP/core-s", p.PerCore)}
			fmt.Println(r)
			rows = append(rows, r)
		}
	}
	return rows
}

// streamingRows reports a memory-bound product as GB/s of B read, over wall
// time and over process CPU time, against the read-bandwidth probe and
// OpenBLAS.
func streamingRows(e *env, ours, theirs timing, s matmulShape, label string, diff float64) []row {
	bytes := 4 * float64(s.n) * float64(s.k)
	bw := e.readBandwidth()
	g := bytes / ours.wall / 1e9
	rw := row{section: "matmul", name: label, value: g, unit: "GB/s of B", ratios: []ratio{{"read BW", g / bw.Wall}}}
	if theirs.wall > 0 {
		rw.ratios = append(rw.ratios, ratio{"OpenBLAS", theirs.wall / ours.wall})
		rw.note = fmt.Sprintf("OpenBLAS %.1f GB/s, max rel diff %.1e", bytes/theirs.wall/1e9, diff)
	}
	fmt.Println(rw)
	rows := []row{rw}
	if ours.cpu > 0 {
		c := bytes / ours.cpu / 1e9
		rc := row{section: "matmul", name: label, value: c, unit: "GB/core-s", ratios: []ratio{{"read BW per core", c / bw.PerCore}}}
		if theirs.cpu > 0 {
			rc.ratios = append(rc.ratios, ratio{"OpenBLAS", theirs.cpu / ours.cpu})
			rc.note = fmt.Sprintf("OpenBLAS %.1f GB/core-s", bytes/theirs.cpu/1e9)
		}
		fmt.Println(rc)
		rows = append(rows, rc)
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

// timing is seconds per call: wall clock, and process CPU time (0 where
// the platform cannot read it).
type timing struct{ wall, cpu float64 }

// best keeps the lower of each figure.
func (t timing) best(u timing) timing {
	if t.wall == 0 {
		return u
	}
	t.wall = min(t.wall, u.wall)
	if u.cpu > 0 && (t.cpu == 0 || u.cpu < t.cpu) {
		t.cpu = u.cpu
	}
	return t
}

// timeCall times enough calls of f to last about 0.2 s, after one untimed
// warm-up call.
func timeCall(f func()) timing {
	t0 := time.Now()
	f()
	n := max(1, int(0.2/max(time.Since(t0).Seconds(), 1e-6)))
	c0, ok := probe.ProcessCPUTime()
	t0 = time.Now()
	for i := 0; i < n; i++ {
		f()
	}
	t := timing{wall: time.Since(t0).Seconds() / float64(n)}
	if c1, ok1 := probe.ProcessCPUTime(); ok && ok1 {
		t.cpu = (c1 - c0).Seconds() / float64(n)
	}
	return t
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
