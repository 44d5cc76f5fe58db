package gemm

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is this OS thread's CPU time: a one-thread product's cost that
// other processes on a shared machine do not inflate (they only wait).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkSwappedPrefetch times the batch-32 decode products of
// Qwen2.5-0.5B (32 rows against each transposed weight: the swapped path)
// on one locked thread with the weight streamed from memory, alternating,
// in the same loop, the kernel that prefetches the next tile's weight rows
// and the plain one. It reports GFLOP per thread-CPU-second of each and
// the ratio of their CPU times (prefetch/plain).
func BenchmarkSwappedPrefetch(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range []struct {
		name string
		n, k int
	}{{"qkv1152x896", 1152, 896}, {"gateup9728x896", 9728, 896}, {"down896x4864", 896, 4864}, {"lmhead151936x896", 151936, 896}} {
		b.Run(s.name, func(b *testing.B) {
			runtime.LockOSThread() // each sub-benchmark runs on its own goroutine
			defer runtime.UnlockOSThread()
			const m = 32
			ws := decodeCopies(rng, s.n, s.k)
			a, c := make([]float32, m*s.k), make([]float32, m*s.n)
			for i := range a {
				a[i] = rng.Float32()*2 - 1
			}
			on := &Engine{kern: kernels[0], threads: 1}
			off := &Engine{kern: kernels[0], threads: 1, noPrefetchA: true}
			var tOn, tOff time.Duration
			for i := 0; b.Loop(); i++ {
				t0 := threadCPU()
				on.Sgemm(false, true, m, s.n, s.k, 1, a, s.k, ws[i%len(ws)], s.k, 0, c, s.n)
				t1 := threadCPU()
				off.Sgemm(false, true, m, s.n, s.k, 1, a, s.k, ws[(i+len(ws)/2)%len(ws)], s.k, 0, c, s.n)
				tOn += t1 - t0
				tOff += threadCPU() - t1
			}
			flops := 2 * float64(m) * float64(s.n) * float64(s.k) * float64(b.N)
			b.ReportMetric(flops/tOn.Seconds()/1e9, "GFLOP/cpu-s-prefetch")
			b.ReportMetric(flops/tOff.Seconds()/1e9, "GFLOP/cpu-s-plain")
			b.ReportMetric(tOn.Seconds()/tOff.Seconds(), "prefetch/plain")
		})
	}
}
