package probe

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/r1go/r1go/model/cpu/gemm"
)

// The probes are timed by nature; these tests only check that every loop
// runs and reports a positive, finite figure, never how fast.

func sane(t *testing.T, what string, v float64) {
	t.Helper()
	if !(v > 0) || math.IsInf(v, 0) {
		t.Fatalf("%s = %v, want positive and finite", what, v)
	}
}

func shortWindows(t *testing.T) {
	w, r := Window, Repeats
	Window, Repeats = 20*time.Millisecond, 1
	t.Cleanup(func() { Window, Repeats = w, r })
}

func TestFMAPeakEveryISA(t *testing.T) {
	shortWindows(t)
	isas := ISAs()
	if isas[len(isas)-1] != "go" || BestISA() != isas[0] {
		t.Fatalf("ISAs() = %v, BestISA() = %q: want the portable loop last and the best first", isas, BestISA())
	}
	for _, isa := range isas {
		for _, threads := range []int{1, 2} {
			g, err := FMAPeakISA(isa, threads)
			if err != nil {
				t.Fatal(err)
			}
			sane(t, isa, g)
		}
	}
	sane(t, "FMAPeak", FMAPeak(1))
	if _, err := FMAPeakISA("mmx", 1); err == nil {
		t.Fatal("FMAPeakISA(mmx) succeeded, want an error")
	}
	if _, err := FMAPeakISA("go", 0); err == nil {
		t.Fatal("FMAPeakISA with 0 threads succeeded, want an error")
	}
}

func TestBandwidth(t *testing.T) {
	shortWindows(t)
	for _, threads := range []int{1, 3} {
		sane(t, "ReadBandwidth", ReadBandwidth(4<<20+100, threads))
		sane(t, "CopyBandwidth", CopyBandwidth(4<<20+100, threads))
		d := ReadBandwidthDetail(4<<20, threads)
		sane(t, "ReadBandwidthDetail.Wall", d.Wall)
		sane(t, "ReadBandwidthDetail.PerCore", d.PerCore)
	}
}

// The vector sum must add every element exactly once, including a tail that
// is not a multiple of the vector block.
func TestSumVectorMatchesLoop(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 4096 + 17} {
		x := make([]float32, n)
		want := 0.0
		for i := range x {
			x[i] = float32(i%7) - 2.5
			want += float64(x[i])
		}
		if got := sumVector(x); math.Abs(float64(got)-want) > 1e-3*max(1, math.Abs(want)) {
			t.Errorf("sumVector(%d elements) = %v, want %v", n, got, want)
		}
	}
}

func TestFMAPeakDetailPerCore(t *testing.T) {
	shortWindows(t)
	p, err := FMAPeakDetail(BestISA(), 2)
	if err != nil {
		t.Fatal(err)
	}
	sane(t, "Wall", p.Wall)
	sane(t, "PerCore", p.PerCore)
	if p.ISA != BestISA() || p.Threads != 2 {
		t.Fatalf("Peak = %+v, want ISA %s on 2 threads", p, BestISA())
	}
	if d, ok := ProcessCPUTime(); ok && d <= 0 {
		t.Fatalf("ProcessCPUTime() = %v after running loops, want > 0", d)
	}
}

func TestDotBF16Peak(t *testing.T) {
	shortWindows(t)
	if _, err := DotBF16Peak(0); err == nil {
		t.Fatal("DotBF16Peak with 0 threads succeeded, want an error")
	}
	p, err := DotBF16Peak(1)
	if dotLoop() == nil {
		if err == nil {
			t.Fatal("DotBF16Peak succeeded on a CPU without AVX512_BF16")
		}
		t.Skip("no AVX512_BF16 on this CPU:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sane(t, "DotBF16Peak Wall", p.Wall)
	sane(t, "DotBF16Peak PerCore", p.PerCore)
	if p.ISA != DotBF16ISA || p.Threads != 1 {
		t.Fatalf("Peak = %+v, want ISA %s on 1 thread", p, DotBF16ISA)
	}
}

func TestAMXPeak(t *testing.T) {
	shortWindows(t)
	p, err := AMXPeak(1)
	if on, why := gemm.HasAMX(); !on {
		if err == nil {
			t.Fatal("AMXPeak succeeded with the tile path off:", why)
		}
		t.Skip("AMX tile path off:", why)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AMXPeak(0); err == nil {
		t.Fatal("AMXPeak with 0 threads succeeded, want an error")
	}
	sane(t, "AMXPeak Wall", p.Wall)
	sane(t, "AMXPeak PerCore", p.PerCore)
	if p.ISA != AMXISA || p.Threads != 1 {
		t.Fatalf("Peak = %+v, want ISA %s on 1 thread", p, AMXISA)
	}
}

// BenchmarkReadPages reads a 512 MiB buffer on every core in 4 KiB pages
// and in huge pages (package pages), taking turns, each its best pass,
// reported in GB/s: what the page size is worth to a stream from memory
// on this machine (a rollout copy's weights are in huge pages where the
// kernel lends them).
func BenchmarkReadPages(b *testing.B) {
	threads := runtime.GOMAXPROCS(0)
	var best [2]float64
	for b.Loop() {
		for i, huge := range []bool{false, true} {
			best[i] = max(best[i], readBandwidth(512<<20, threads, huge).Wall)
		}
	}
	b.ReportMetric(best[0], "4KiB-GB/s")
	b.ReportMetric(best[1], "huge-GB/s")
	b.ReportMetric(best[1]/best[0], "huge/4KiB")
}
