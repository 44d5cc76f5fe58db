package cuda

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkGPUDecodeTC times one layer's decode attention (AttentionCached,
// one token for each of B slots holding ctx keys) on the tensor-core
// kernel with its planned splits or a forced count, and on the CUDA-core
// kernel (core), for the Qwen2.5 0.5B and 1.5B heads, against the
// device-to-device copy of a large buffer in the same run: kv-GB/s is the
// cache read (keys and values, bf16) over the time, of-copy its fraction
// of the copy's rate, the ceiling a read-bound kernel can reach.
//
//	go test -run '^$' -bench BenchmarkGPUDecodeTC -benchtime 50x ./cuda
func BenchmarkGPUDecodeTC(b *testing.B) {
	gpuOnce.Do(func() { gpuDev, gpuErr = Open() })
	if gpuErr != nil {
		b.Skipf("no GPU: %v", gpuErr)
	}
	d := gpuDev
	copyGBs := benchCopy(b, d)
	for _, c := range []struct {
		name           string
		NH, KVH, HS    int
		B, ctx, splits int
		core           bool
	}{
		{"0.5B/b256/ctx2048", 14, 2, 64, 256, 2048, 0, false},
		{"0.5B/b256/ctx2048/splits2", 14, 2, 64, 256, 2048, 2, false},
		{"0.5B/b256/ctx2048/core", 14, 2, 64, 256, 2048, 0, true},
		{"1.5B/b256/ctx2048", 12, 2, 128, 256, 2048, 0, false},
		{"0.5B/b64/ctx2048", 14, 2, 64, 64, 2048, 0, false},
		{"0.5B/b64/ctx2048/splits1", 14, 2, 64, 64, 2048, 1, false},
		{"0.5B/b1/ctx2048", 14, 2, 64, 1, 2048, 0, false},
		{"0.5B/b1/ctx2048/splits4", 14, 2, 64, 1, 2048, 4, false},
		{"0.5B/b1/ctx2048/splits32", 14, 2, 64, 1, 2048, 32, false},
		{"0.5B/b1/ctx144", 14, 2, 64, 1, 144, 0, false},
		{"0.5B/b1/ctx144/splits2", 14, 2, 64, 1, 144, 2, false},
		{"0.5B/b1/ctx144/core", 14, 2, 64, 1, 144, 0, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer func(s int, on bool) { decodeForceSplits, decodeTCOn = s, on }(decodeForceSplits, decodeTCOn)
			decodeForceSplits, decodeTCOn = c.splits, !c.core
			maxLen := c.ctx + 2
			W, kvw := (c.NH+2*c.KVH)*c.HS, c.KVH*c.HS
			kc, vc := d.AllocType(c.B*maxLen*kvw, BF16), d.AllocType(c.B*maxLen*kvw, BF16)
			qkv, out := d.AllocType(c.B*W, BF16), d.AllocType(c.B*c.NH*c.HS, BF16)
			defer func() {
				for _, x := range []Buffer{kc, vc, qkv, out} {
					d.Free(x)
				}
			}()
			slots, pos0, lens := make([]int32, c.B), make([]int32, c.B), make([]int32, c.B)
			for j := range slots {
				slots[j], pos0[j], lens[j] = int32(j), int32(c.ctx), 1
			}
			run := func() { d.AttentionCached(out, qkv, nil, kc, vc, slots, pos0, lens, maxLen, c.NH, c.KVH, c.HS, 0) }
			run()
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				run()
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			s := b.Elapsed().Seconds() / float64(b.N)
			gbs := float64(2*c.B*(c.ctx+1)*kvw*2) / s / 1e9
			b.ReportMetric(gbs, "kv-GB/s")
			b.ReportMetric(gbs/copyGBs, "of-copy")
		})
	}
}

// benchCopy returns the device-to-device copy rate of a 1 GiB buffer in
// GB/s (bytes read plus bytes written).
func benchCopy(b *testing.B, d *Device) float64 {
	const n = 1 << 28 // floats
	src, dst := d.AllocType(n, F32), d.AllocType(n, F32)
	defer d.Free(src)
	defer d.Free(dst)
	d.Copy(dst, src)
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
	best := 0.0
	for range 5 {
		t0 := time.Now()
		for range 4 {
			d.Copy(dst, src)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		best = max(best, 4*2*4*n/time.Since(t0).Seconds()/1e9)
	}
	fmt.Printf("device copy: %.0f GB/s\n", best)
	return best
}
