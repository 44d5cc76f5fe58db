package cpu

import (
	"syscall"
	"testing"
	"time"

	"github.com/r1go/r1go/model"
)

// processCPU is this process's CPU time, all threads (getrusage).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeAB05B times batch-32 decode steps of Qwen2.5-0.5B's shapes
// at cache position 192 (the middle of the step section's 64 + 256 tokens;
// the cache holds zeros, which costs what real keys cost), sampling at
// temperature 1, alternating in one loop the device's vector element-wise
// paths (exp32Into, the cached attention kernels) and the
// element-by-element ones they replaced (host sampling's exp64Into is
// model's, timed by its BenchmarkExp64Ops), and reports per step the wall
// time and the process CPU time of each and their ratios (new/former).
// The products, the bulk of a step, are the same in both (their own
// before/after is gemm's BenchmarkSwappedPrefetch). CPU time is the figure
// to read on a shared machine.
//
//	go test -run XXX -bench DecodeAB05B -benchtime 6x ./model/cpu
func BenchmarkDecodeAB05B(b *testing.B) {
	m := qwen05B(b, true)
	const slots, at = 32, 192
	c := m.NewKVCache(slots, 320)
	chunks := make([]model.Chunk, slots)
	for s := range chunks {
		chunks[s] = model.Chunk{Slot: s, Tokens: make([]int32, 4)}
	}
	if _, err := m.Step(c, chunks); err != nil {
		b.Fatal(err)
	}
	samp := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	seeds := make([]uint64, slots)
	step := func(i int, former bool) (wall, cpu time.Duration) {
		expNoVector, attnNoVector = former, former
		defer func() { expNoVector, attnNoVector = false, false }()
		for s := range chunks {
			seeds[s] = uint64(i*slots + s)
			c.Lens[s] = at
			chunks[s].Tokens = []int32{int32((i*31 + s) % 151936)}
		}
		t0, c0 := time.Now(), processCPU()
		if _, err := m.StepSample(c, chunks, samp, seeds, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), processCPU() - c0
	}
	var w [2]time.Duration
	var u [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for v, former := range []bool{false, true} {
			dw, du := step(i, former)
			w[v] += dw
			u[v] += du
		}
	}
	n := float64(b.N)
	b.ReportMetric(w[0].Seconds()*1e3/n, "ms-wall-new")
	b.ReportMetric(w[1].Seconds()*1e3/n, "ms-wall-former")
	b.ReportMetric(u[0].Seconds()*1e3/n, "ms-cpu-new")
	b.ReportMetric(u[1].Seconds()*1e3/n, "ms-cpu-former")
	b.ReportMetric(u[0].Seconds()/u[1].Seconds(), "cpu-new/former")
	b.ReportMetric(w[0].Seconds()/w[1].Seconds(), "wall-new/former")
}
