// Command cuda is the lab benchmark of the GPU device's kernels, one case
// per kernel in the manner of llm.c's dev/cuda: each case runs the CUDA op
// and the CPU device's op (the reference) on the same random inputs,
// reports the largest relative difference (validation), the GPU time, the
// achieved bandwidth or FLOP rate, and two ratios against denominators
// measured in the same run:
//
//   - of ceiling: achieved GB/s over the device-to-device copy bandwidth
//     (memory-bound kernels), or TFLOP/s over cuBLAS's rate on a large
//     square GEMM (compute-bound kernels);
//   - x CPU: the CPU device's time for the same op over the GPU's.
//
// Usage (on a GPU machine; elsewhere it says why it cannot run):
//
//	go run ./benchmarks/cuda [-tokens 4096] [-reps 20] [-cpu=true] [-tf32=false] [-cases attention,lmhead]
//	go run ./benchmarks/cuda -attention-tc [-tokens 4096] [-tc-validate 512]
//
// Two whole-model cases follow the kernels: train_step (forward and
// backward of -tokens packed tokens; tokens/s and model FLOPs utilisation
// against the GEMM ceiling) and decode_step (-decode-slots sequences, one
// token each, against a KV cache of -decode-ctx tokens), on the -model
// configuration with random weights.
//
// -attention-tc times the tensor-core attention instead (tc.go): bf16
// q|k|v on the heads of Qwen2.5-0.5B and 1.5B, every forward tile shape
// and both backwards, against cuBLAS's bf16 GEMM rate in the same run.
//
// With -precompile DIR it needs no GPU, only NVRTC: it compiles every
// kernel for -arch (default sm_90a) into DIR, a kernel cache that a GPU
// machine without NVRTC can use through R1GO_CUDA_CACHE=DIR.
//
// Shapes are Qwen2.5-0.5B's (C 896, I 4864, 14 query and 2 key-value heads
// of 64, V 151936) over -tokens packed tokens in sequences of 1024.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

func main() {
	tokens := flag.Int("tokens", 4096, "packed tokens per batch")
	reps := flag.Int("reps", 20, "timed repetitions per GPU case")
	withCPU := flag.Bool("cpu", true, "run the CPU device on each case (validation and the x CPU ratio)")
	tf32 := flag.Bool("tf32", false, "TF32 tensor cores for float32 matmuls")
	only := flag.String("cases", "", "comma-separated case names (default: all)")
	precompile := flag.String("precompile", "", "compile every kernel into this folder with NVRTC and exit (no GPU needed)")
	arch := flag.String("arch", "sm_90a", "target architecture of -precompile")
	gemmN := flag.Int("gemm-n", 8192, "size of the square GEMM of the compute ceiling")
	copyMB := flag.Int("copy-mb", 1024, "MiB copied for the bandwidth ceiling")
	adamN := flag.Int("adamw-params", 494_000_000, "parameters of the AdamW case (Qwen2.5-0.5B: 494M)")
	cfgPath := flag.String("model", "model/testdata/config_qwen2.5-0.5b.json", "config.json of the whole-model cases (random weights)")
	slots := flag.Int("decode-slots", 64, "sequences of the decode_step case")
	ctx := flag.Int("decode-ctx", 512, "tokens already in the cache in the decode_step case")
	tcOnly := flag.Bool("attention-tc", false, "time the tensor-core attention (bf16, both head configurations, every forward tile shape, both backwards) and exit")
	tcValidate := flag.Int("tc-validate", 512, "tokens of the tensor-core attention's validation against the CPU device (0: none)")
	flag.Parse()

	if *precompile != "" {
		files, err := cuda.PrecompileKernels(*precompile, *arch)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, f := range files {
			fmt.Println(f)
		}
		return
	}

	gpu, err := cuda.OpenWith(cuda.Options{TF32: *tf32})
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		fmt.Fprintf(os.Stderr, "benchmarks/cuda needs a GPU: %v\n", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer gpu.Close()
	fmt.Printf("device: %s, TF32 %v, %d tokens, %d reps\n", gpu.Name(), *tf32, *tokens, *reps)

	l := &lab{gpu: gpu, cpu: cpu.New(), reps: *reps, withCPU: *withCPU}
	if *tcOnly {
		l.tensorCoreAttention(os.Stdout, *tokens, *gemmN, 4096, *tcValidate)
		return
	}
	l.copyGBs = l.copyCeiling(*copyMB << 18)
	l.gemmTFs = l.gemmCeiling(*gemmN)
	fmt.Printf("ceilings (same run): device copy of %d MiB %.0f GB/s, cuBLAS GEMM %d³ %.1f TFLOP/s\n\n", *copyMB, l.copyGBs, *gemmN, l.gemmTFs)

	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tshape\tGPU ms\tachieved\tof ceiling\tCPU ms\tx CPU\tmax rel diff")
	for _, c := range cases(*tokens, *adamN) {
		if *only != "" && !strings.Contains(","+*only+",", ","+c.name+",") {
			continue
		}
		fmt.Fprintf(os.Stderr, "running %s (%s)\n", c.name, c.shape)
		fmt.Fprintln(tw, l.run(c))
	}
	tw.Flush()

	fmt.Println()
	fmt.Fprintln(tw, "whole model\tshape\tGPU ms\tthroughput\tof ceiling (MFU)\tCPU ms\tx CPU\tmax rel diff (logprobs, logits)")
	if *only == "" || strings.Contains(","+*only+",", ",train_step,") {
		fmt.Fprintln(os.Stderr, "running train_step")
		fmt.Fprintln(tw, l.trainStep(*cfgPath, *tokens))
	}
	if *only == "" || strings.Contains(","+*only+",", ",decode_step,") {
		fmt.Fprintln(os.Stderr, "running decode_step")
		fmt.Fprintln(tw, l.decodeStep(*cfgPath, *slots, *ctx))
	}
	tw.Flush()
}

// labCase is one kernel on one shape. setup allocates and fills its inputs
// on a device (the same values on every device: the data come from seed)
// and returns the op to time and the buffers to compare.
type labCase struct {
	name, shape string
	bytes       float64 // minimal memory traffic of one run (memory-bound cases)
	flops       float64 // floating-point operations of one run (compute-bound cases)
	setup       func(d model.Device) (run func(), outputs []model.Buffer)
}

type lab struct {
	gpu              *cuda.Device
	cpu              model.Device
	reps             int
	withCPU          bool
	copyGBs, gemmTFs float64
}

type result struct {
	c                labCase
	gpuMs, cpuMs     float64
	achieved, ofCeil float64
	unit             string
	diff             float64
}

func (r result) String() string {
	cpu, x := "-", "-"
	if r.cpuMs > 0 {
		cpu, x = fmt.Sprintf("%.2f", r.cpuMs), fmt.Sprintf("%.3g", r.cpuMs/r.gpuMs)
	}
	diff := "-"
	if !math.IsInf(r.diff, -1) {
		diff = fmt.Sprintf("%.2g", r.diff)
	}
	return fmt.Sprintf("%s\t%s\t%.3f\t%.1f %s\t%.0f%%\t%s\t%s\t%s", r.c.name, r.c.shape, r.gpuMs, r.achieved, r.unit, 100*r.ofCeil, cpu, x, diff)
}

// timeIt runs run once to warm up (kernel compilation, scratch growth),
// then reps times, and returns milliseconds per run.
func timeIt(d model.Device, run func(), reps int) float64 {
	run()
	if err := d.Sync(); err != nil {
		panic(err)
	}
	start := time.Now()
	for range reps {
		run()
	}
	if err := d.Sync(); err != nil {
		panic(err)
	}
	return float64(time.Since(start).Microseconds()) / 1e3 / float64(reps)
}

func (l *lab) run(c labCase) result {
	r := result{c: c, diff: math.Inf(-1)}
	run, _ := c.setup(l.gpu)
	r.gpuMs = timeIt(l.gpu, run, l.reps)
	if c.flops > 0 {
		r.achieved, r.unit = c.flops/r.gpuMs/1e9, "TFLOP/s"
		r.ofCeil = r.achieved / l.gemmTFs
	} else {
		r.achieved, r.unit = c.bytes/r.gpuMs/1e6, "GB/s"
		r.ofCeil = r.achieved / l.copyGBs
	}
	if l.withCPU {
		crun, _ := c.setup(l.cpu)
		r.cpuMs = timeIt(l.cpu, crun, 1)
		// The timed runs repeat the op; compare after exactly one run of
		// each from fresh inputs, so accumulating ops agree.
		grun, gouts := c.setup(l.gpu)
		crun2, couts2 := c.setup(l.cpu)
		grun()
		crun2()
		for k := range gouts {
			r.diff = math.Max(r.diff, relDiff(download(l.gpu, gouts[k]), download(l.cpu, couts2[k])))
		}
	}
	return r
}

// copyCeiling is the device-to-device copy bandwidth of n float32 values
// (read plus write bytes per second).
func (l *lab) copyCeiling(n int) float64 {
	a, b := l.gpu.Alloc(n), l.gpu.Alloc(n)
	defer l.gpu.Free(a)
	defer l.gpu.Free(b)
	ms := timeIt(l.gpu, func() { l.gpu.Copy(b, a) }, l.reps)
	return 2 * 4 * float64(n) / ms / 1e6
}

// gemmCeiling is cuBLAS's float32 (or TF32) rate on an n³ GEMM.
func (l *lab) gemmCeiling(n int) float64 {
	a, b, c := l.gpu.Alloc(n*n), l.gpu.Alloc(n*n), l.gpu.Alloc(n*n)
	defer l.gpu.Free(a)
	defer l.gpu.Free(b)
	defer l.gpu.Free(c)
	fill(l.gpu, a, 1, 0.01)
	fill(l.gpu, b, 2, 0.01)
	ms := timeIt(l.gpu, func() { l.gpu.Gemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n) }, max(l.reps/4, 3))
	return 2 * math.Pow(float64(n), 3) / ms / 1e9
}

func download(d model.Device, b model.Buffer) []float32 {
	x := make([]float32, b.Len())
	d.Download(x, b)
	return x
}

// relDiff is max|a − b| / max|b| (NaN in a counts as +Inf).
func relDiff(a, b []float32) float64 {
	var diff, scale float64
	for i := range b {
		if math.IsNaN(float64(a[i])) {
			return math.Inf(1)
		}
		diff = math.Max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	return diff / math.Max(scale, 1e-30)
}
