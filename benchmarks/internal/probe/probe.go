// Package probe measures the hardware ceilings that CPU benchmarks divide
// by, in the same run as the figure they judge: the fused multiply-add peak
// (FMAPeak) and memory read and copy bandwidth (ReadBandwidth,
// CopyBandwidth).
//
// Each probe runs its loop on the requested number of goroutines, each
// locked to an OS thread, for about Window, a few times, and reports the
// best run. Probes take no input that can be malformed; a bad argument
// (threads < 1, an unknown ISA) is reported as an error or a panic for a
// programmer's mistake.
package probe

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/r1go/r1go/internal/pages"
)

// Window is how long one timed run of a probe lasts; Repeats is how many
// runs it takes the best of.
var (
	Window  = 300 * time.Millisecond
	Repeats = 3
)

// fmaLoop is an assembly loop of independent FMA chains.
type fmaLoop struct {
	isa          string
	flopsPerIter float64
	run          func(iters int)
}

// loops lists the FMA loops this CPU can run, widest first; the portable Go
// loop is always last.
var loops = append(vectorLoops(), fmaLoop{isa: "go", flopsPerIter: goChains * 2, run: fmaGo})

// sumVector sums x, with vector loads where the CPU has them.
var sumVector = vectorSum()

// ISAs names the FMA loops usable on this CPU, widest first ("avx512",
// "avx2", and always "go").
func ISAs() []string {
	var s []string
	for _, l := range loops {
		s = append(s, l.isa)
	}
	return s
}

// BestISA is the widest FMA loop this CPU runs: the one FMAPeak uses.
func BestISA() string { return loops[0].isa }

// FMAPeak returns the float32 FMA peak in GFLOP/s (one FMA = 2 flops) of
// threads goroutines running the widest vector FMA loop this CPU has.
func FMAPeak(threads int) float64 {
	g, err := FMAPeakISA(BestISA(), threads)
	if err != nil {
		panic(err)
	}
	return g
}

// FMAPeakISA is FMAPeak for a named loop (see ISAs).
func FMAPeakISA(isa string, threads int) (float64, error) {
	p, err := FMAPeakDetail(isa, threads)
	return p.Wall, err
}

// Peak is one FMA peak measurement.
type Peak struct {
	ISA     string
	Threads int
	// Wall is GFLOP/s over wall-clock time: what the threads achieved
	// together, including any time the OS gave their cores to others.
	Wall float64
	// PerCore is GFLOP per second of thread CPU time: the rate of one core
	// while it runs the loop, unaffected by other processes taking turns on
	// a shared machine (equal to Wall/Threads on an idle one). Where thread
	// CPU time is not available it is Wall/Threads.
	PerCore float64
}

// FMAPeakDetail measures the named loop (see ISAs) on threads goroutines.
func FMAPeakDetail(isa string, threads int) (Peak, error) {
	if threads < 1 {
		return Peak{}, fmt.Errorf("probe: threads = %d, want ≥ 1", threads)
	}
	for _, l := range loops {
		if l.isa == isa {
			wall, perCore := measureFMA(l, threads)
			return Peak{ISA: isa, Threads: threads, Wall: wall, PerCore: perCore}, nil
		}
	}
	return Peak{}, fmt.Errorf("probe: FMA loop %q not available on this CPU (have %v)", isa, ISAs())
}

// DotBF16ISA names the bf16 dot-product loop in Peak.ISA.
const DotBF16ISA = "avx512bf16"

// DotBF16Peak measures the bf16 dot-product peak in GFLOP/s of threads
// goroutines running chains of VDPBF16PS (AVX512_BF16), each instruction
// 16 lanes × 2 bf16 products × 2 flops: the ceiling of the bf16 copy's
// products, as FMAPeak is that of the float32 ones. It reports an error
// on a CPU (or build) without the instruction.
func DotBF16Peak(threads int) (Peak, error) {
	l := dotLoop()
	if l == nil {
		return Peak{}, fmt.Errorf("probe: no AVX512_BF16 dot product on this CPU")
	}
	if threads < 1 {
		return Peak{}, fmt.Errorf("probe: threads = %d, want ≥ 1", threads)
	}
	wall, perCore := measureFMA(*l, threads)
	return Peak{ISA: l.isa, Threads: threads, Wall: wall, PerCore: perCore}, nil
}

func measureFMA(l fmaLoop, threads int) (wall, perCore float64) {
	// Size a chunk to about 1 ms on one thread so the deadline check is rare.
	chunk := 1 << 10
	for {
		t0 := time.Now()
		l.run(chunk)
		if time.Since(t0) > time.Millisecond || chunk > 1<<28 {
			break
		}
		chunk *= 2
	}
	for rep := 0; rep < Repeats; rep++ {
		iters := make([]int, threads)
		cpu := make([]time.Duration, threads)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				<-start
				c0 := threadCPUTime()
				deadline := time.Now().Add(Window)
				for time.Now().Before(deadline) {
					l.run(chunk)
					iters[t] += chunk
				}
				cpu[t] = threadCPUTime() - c0
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		el := time.Since(t0).Seconds()
		flops, cpuSec := 0.0, 0.0
		for t := range iters {
			flops += float64(iters[t]) * l.flopsPerIter
			cpuSec += cpu[t].Seconds()
		}
		wall = max(wall, flops/el/1e9)
		if cpuSec > 0 {
			perCore = max(perCore, flops/cpuSec/1e9)
		}
	}
	if perCore == 0 {
		perCore = wall / float64(threads)
	}
	return wall, perCore
}

const goChains = 8

// fmaMul and fmaAdd are variables, not constants, so the compiler cannot
// fold the multiply by one away.
var fmaMul, fmaAdd float32 = 1, 1e-7

// fmaGo is the portable loop: eight independent scalar multiply-add chains
// (fused on arm64, a multiply and an add on amd64: two flops either way).
func fmaGo(iters int) {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	x, y := fmaAdd, fmaMul
	for i := 0; i < iters; i++ {
		a0 = a0*y + x
		a1 = a1*y + x
		a2 = a2*y + x
		a3 = a3*y + x
		a4 = a4*y + x
		a5 = a5*y + x
		a6 = a6*y + x
		a7 = a7*y + x
	}
	sink = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// sink is written and never read: it keeps the compiler from dropping the
// loop whose result it holds.
//
//lint:ignore U1000 written so that the measured loop is not optimised away
var sink float32

func sumGo(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return s0 + s1 + s2 + s3
}

// Bandwidth is one memory bandwidth measurement in GB/s (10⁹ bytes per
// second).
type Bandwidth struct {
	// Wall is over wall-clock time: what the threads achieved together.
	Wall float64
	// PerCore is over the CPU time the process used: the rate of one core
	// while it runs, comparable under load from other processes. It is
	// Wall/threads where process CPU time cannot be read.
	PerCore float64
}

// ReadBandwidth returns the read bandwidth in GB/s of threads goroutines
// summing disjoint parts of a buffer of the given size with vector loads.
// Use a buffer several times the last-level cache to measure memory rather
// than cache.
func ReadBandwidth(bytes, threads int) float64 { return ReadBandwidthDetail(bytes, threads).Wall }

// ReadBandwidthDetail is ReadBandwidth with the per-core figure. The
// buffer is in huge pages where a rollout copy's weights are
// (R1GO_HUGEPAGES=1, package pages), so that a bound set from it reads
// the way the weights are read.
func ReadBandwidthDetail(bytes, threads int) Bandwidth {
	return readBandwidth(bytes, threads, pages.On)
}

// readBandwidth is ReadBandwidthDetail with the buffer in huge pages or
// not.
func readBandwidth(bytes, threads int, huge bool) Bandwidth {
	checkArgs(bytes, threads)
	x := pages.Alloc[float32](bytes/4, huge)
	for i := range x {
		x[i] = 1 // touch every page before timing
	}
	return bestPass(threads, float64(len(x)*4), func(t int) {
		lo, hi := span(len(x), t, threads)
		sink += sumVector(x[lo:hi])
	})
}

// CopyBandwidth returns the copy bandwidth in GB/s of threads goroutines
// each copying its part of a buffer of the given size into another with
// Go's copy (memmove), counting the bytes read plus the bytes written.
func CopyBandwidth(bytes, threads int) float64 { return CopyBandwidthDetail(bytes, threads).Wall }

// CopyBandwidthDetail is CopyBandwidth with the per-core figure.
func CopyBandwidthDetail(bytes, threads int) Bandwidth {
	checkArgs(bytes, threads)
	src := make([]byte, bytes)
	dst := make([]byte, bytes)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault in dst's pages
	return bestPass(threads, 2*float64(bytes), func(t int) {
		lo, hi := span(len(src), t, threads)
		copy(dst[lo:hi], src[lo:hi])
	})
}

func checkArgs(bytes, threads int) {
	if bytes < 1<<10 || threads < 1 {
		panic(fmt.Sprintf("probe: buffer of %d bytes on %d threads, want ≥ 1 KiB and ≥ 1 thread", bytes, threads))
	}
}

func span(n, t, threads int) (lo, hi int) {
	// Cut at 256-byte boundaries so every part keeps whole vector blocks.
	const align = 64
	lo = (n * t / threads) &^ (align - 1)
	hi = (n * (t + 1) / threads) &^ (align - 1)
	if t == threads-1 {
		hi = n
	}
	return lo, hi
}

// bestPass runs body on threads locked goroutines, pass after pass, for
// Repeats windows, and returns the best single pass.
func bestPass(threads int, bytesPerPass float64, body func(t int)) Bandwidth {
	var best Bandwidth
	deadline := time.Now().Add(time.Duration(Repeats) * Window)
	for pass := 0; pass < 3 || time.Now().Before(deadline); pass++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		ready := sync.WaitGroup{}
		for t := 0; t < threads; t++ {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ready.Done()
				<-start
				body(t)
			}()
		}
		ready.Wait()
		c0, ok := ProcessCPUTime()
		t0 := time.Now()
		close(start)
		wg.Wait()
		el := time.Since(t0).Seconds()
		best.Wall = max(best.Wall, bytesPerPass/el/1e9)
		if c1, ok1 := ProcessCPUTime(); ok && ok1 && c1 > c0 {
			best.PerCore = max(best.PerCore, bytesPerPass/(c1-c0).Seconds()/1e9)
		}
	}
	if best.PerCore == 0 {
		best.PerCore = best.Wall / float64(threads)
	}
	return best
}
