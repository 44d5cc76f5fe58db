package cuda

import (
	"fmt"
	"os"
	"sync"
)

// Memory accounting, for checking model/plan's figures on a real card:
// the bytes this Device holds in cuMemAlloc'd (or VMM) allocations, live
// and at their peak, and, with R1GO_CUDA_MEMSTATS=1, the device's used
// memory (total less cuMemGetInfo's free, what nvidia-smi shows for a
// process alone on the card) sampled after every allocation, with what
// the context, cuBLAS and its workspace took at Open. The plan's
// "workspace" item estimates that last part; the rest of its items are
// the allocations. Close prints the figures to standard error.

// memStats is a Device's allocation accounting.
type memStats struct {
	live, peak int64 // bytes of live allocations; the most at once
	sample     bool  // R1GO_CUDA_MEMSTATS=1: sample cuMemGetInfo
	usedAtOpen int64 // device memory in use once the context, cuBLAS and its workspace exist
	usedPeak   int64 // the most in use at an allocation, sampled
}

var memStatsEnv = sync.OnceValue(func() bool { return os.Getenv("R1GO_CUDA_MEMSTATS") == "1" })

// noteAlloc counts an allocation of n bytes.
func (d *Device) noteAlloc(n int) {
	d.mem.live += int64(n)
	d.mem.peak = max(d.mem.peak, d.mem.live)
	if d.mem.sample {
		d.mem.usedPeak = max(d.mem.usedPeak, d.usedBytes())
	}
}

// noteFree counts the release of an allocation of n bytes.
func (d *Device) noteFree(n int) { d.mem.live -= int64(n) }

// usedBytes is the device's memory in use: total less free.
func (d *Device) usedBytes() int64 {
	free, total := d.memInfo()
	return int64(total - free)
}

// AllocatedBytes returns the bytes this Device holds in allocations now
// and the most it has held at once (its buffers, arenas, scratch and the
// cuBLAS workspace; not the context, modules or libraries).
func (d *Device) AllocatedBytes() (now, peak int64) {
	defer d.enter()()
	return d.mem.live, d.mem.peak
}

// memStatsOpen records the memory in use once the Device is set up.
func (d *Device) memStatsOpen() {
	d.mem.sample = memStatsEnv()
	if d.mem.sample {
		d.mem.usedAtOpen = d.usedBytes()
		d.mem.usedPeak = d.mem.usedAtOpen
	}
}

// memStatsReport prints the accounting when R1GO_CUDA_MEMSTATS=1.
func (d *Device) memStatsReport() {
	if !d.mem.sample {
		return
	}
	const gib = 1 << 30
	vmPeak := d.vm.peak
	fmt.Fprintf(os.Stderr, "cuda memory (%s): allocations peak %.3f GiB (VMM mapped peak %.3f GiB); in use at open %.3f GiB (context, cuBLAS, its workspace), sampled peak in use %.3f GiB\n",
		d.name, float64(d.mem.peak)/gib, float64(vmPeak)/gib, float64(d.mem.usedAtOpen)/gib, float64(d.mem.usedPeak)/gib)
}
