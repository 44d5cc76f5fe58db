package probe

import (
	"fmt"
	"sync"

	"github.com/r1go/r1go/model/cpu/gemm"
)

// AMXISA names the tile unit's product in Peak.ISA.
const AMXISA = "amx-bf16"

// amxM, amxN and amxK are the product AMXPeak repeats: a decode batch of
// 32 rows of A against 256 bf16 rows of depth 896 (448 KiB, in a core's
// L2), through the whole path of gemm.SgemmDotBF16TransB (rounding A,
// packing it, the tiles, the transposed write of C) on one thread.
const amxM, amxN, amxK = 32, 256, 896

// amxOperands pools one goroutine's operands (L2 is a core's own).
var amxOperands = sync.Pool{New: func() any {
	o := &amxOps{a: make([]float32, amxM*amxK), b: make([]uint16, amxN*amxK), c: make([]float32, amxM*amxN)}
	for i := range o.a {
		o.a[i] = float32(i%13) * 0.1
	}
	for i := range o.b {
		o.b[i] = uint16(0x3c00 + i%97)
	}
	return o
}}

type amxOps struct {
	a []float32
	b []uint16
	c []float32
}

// AMXPeak measures the bf16 product on the AMX tile unit in GFLOP/s of
// threads goroutines, each repeating an in-cache product of a decode
// batch's shape through gemm's whole path: the ceiling of the bf16 copy's
// products where they run on tiles (gemm.HasAMX), as DotBF16Peak is where
// they run on VDPBF16PS. Packing and the transposed write count against
// it, so it sits below the instruction's own rate. It reports an error
// where the tile path is off.
func AMXPeak(threads int) (Peak, error) {
	if on, why := gemm.HasAMX(); !on {
		return Peak{}, fmt.Errorf("probe: no AMX tile product here: %s", why)
	}
	if threads < 1 {
		return Peak{}, fmt.Errorf("probe: threads = %d, want ≥ 1", threads)
	}
	l := fmaLoop{isa: AMXISA, flopsPerIter: 2 * amxM * amxN * amxK, run: func(iters int) {
		o := amxOperands.Get().(*amxOps)
		defer amxOperands.Put(o)
		for range iters {
			gemm.SgemmDotBF16TransB(amxM, amxN, amxK, 1, o.a, amxK, o.b, amxK, 0, o.c, amxN, 1)
		}
	}}
	wall, perCore := measureFMA(l, threads)
	return Peak{ISA: AMXISA, Threads: threads, Wall: wall, PerCore: perCore}, nil
}
