package cuda

import (
	"math"
	"unsafe"

	"github.com/r1go/r1go/model"
)

var (
	kAdamW      = kernel("adamw.cu", "adamw_update", 256)
	kSumSquares = kernel("adamw.cu", "sum_squares", 256)
)

// AdamW updates p in place from g and the moments m, v: one fused pass
// over the flat buffers. The bias corrections are computed here in
// float64, as the CPU device does.
func (d *Device) AdamW(pb, g, m, v model.Buffer, hp model.AdamWParams) {
	n := pb.Len()
	if g.Len() != n || m.Len() != n || v.Len() != n {
		panic("cuda: AdamW buffers of different lengths")
	}
	pp, pg, pm, pv := f32(pb, n, "AdamW p"), f32(g, n, "AdamW g"), f32(m, n, "AdamW m"), f32(v, n, "AdamW v")
	c1 := 1 - math.Pow(float64(hp.Beta1), float64(hp.Step))
	c2 := 1 - math.Pow(float64(hp.Beta2), float64(hp.Step))
	defer d.enter()()
	if d.adamwMixed(pp, pg, pm, pv, n, hp, c1, c2) {
		return
	}
	d.launch(kAdamW, d.elementwiseGrid(n), grid1(256), 0, argPtr(pp), argPtr(pg), argPtr(pm), argPtr(pv), argInt64(n),
		argFloat(hp.LR), argFloat(hp.Beta1), argFloat(hp.Beta2), argFloat(hp.Eps), argFloat(hp.WeightDecay), argFloat(float32(c1)), argFloat(float32(c2)), argFloat(hp.GradScale))
}

// SumSquares returns Σ x², accumulated in float64, and waits for it.
func (d *Device) SumSquares(x model.Buffer) float64 {
	n := x.Len()
	px := f32(x, n, "SumSquares x")
	defer d.enter()()
	out := d.scratchBuf("sumsq", 2, F32) // one float64
	d.memset(out.ptr, 0, 2)
	d.launch(kSumSquares, d.elementwiseGrid(n), grid1(256), 0, argPtr(out.ptr), argPtr(px), argInt64(n))
	var s float64
	d.download(unsafe.Pointer(&s), out.ptr, 8)
	return s
}
