package cuda

import "time"

var kTCMMAPeak = kernel("tc_check.cu", "tc_mma_peak", 256)

// MMAPeak measures the mma.sync ceiling of the GPU: tc_mma_peak's
// register-only m16n8k16 bf16 chains (8 independent accumulators a warp,
// 16 blocks of 8 warps an SM) for iters rounds, reps times after one
// warm-up, timed by the host clock around a Sync. It is the rate no kernel
// built on mma.sync (the tensor-core attention) can pass; cuBLAS's GEMMs
// use Hopper's wgmma and may. Returns TFLOP/s.
func (d *Device) MMAPeak(iters, reps int) (float64, error) {
	blocks := 16 * max(d.sms, 1)
	out := d.Alloc(blocks * 256 * 32)
	defer d.Free(out)
	run := func() {
		defer d.enter()()
		d.launch(kTCMMAPeak, grid1(blocks), grid1(256), 0, argPtr(out.(Buffer).ptr), argInt(iters), 1)
	}
	run()
	if err := d.Sync(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		run()
	}
	if err := d.Sync(); err != nil {
		return 0, err
	}
	flops := float64(reps) * float64(blocks*8) * 2 * 16 * 8 * 16 * 8 * float64(iters)
	return flops / time.Since(start).Seconds() / 1e12, nil
}
