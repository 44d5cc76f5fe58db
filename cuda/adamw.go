package cuda

import (
	"math"
	"unsafe"

	"github.com/r1go/r1go/model"
)

var (
	kAdamW      = kernel("adamw.cu", "adamw_update", 256)
	kSumSquares = kernel("adamw.cu", "sum_squares", 256)

	kAdamWMomentsBF16 = kernel("adamw.cu", "adamw_update_mbf16", 256)
)

// AdamW updates p in place from g and the moments m, v: one fused pass
// over the flat buffers. The bias corrections are computed here in
// float64, as the CPU device does.
func (d *Device) AdamW(pb, g, m, v model.Buffer, hp model.AdamWParams) {
	n := pb.Len()
	if g.Len() != n || m.Len() != n || v.Len() != n {
		panic("cuda: AdamW buffers of different lengths")
	}
	if x, ok := m.(Buffer); ok && x.dtype == BF16 {
		d.adamwMomentsBF16(pb, g, m, v, hp)
		return
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

// adamwMomentsBF16 is AdamW with both moments stored as bf16 (AllocBF16;
// optim state_dtype bfloat16): the CPU device's step, stochastic rounding
// of the moments included, and under mixed precision the weights' bf16
// copy written in the same pass.
func (d *Device) adamwMomentsBF16(pb, g, m, v model.Buffer, hp model.AdamWParams) {
	n := pb.Len()
	pp, pg := f32(pb, n, "AdamW p"), f32(g, n, "AdamW g")
	pm, mbf, _ := weightArg(m, n, "AdamW m")
	pv, vbf, _ := weightArg(v, n, "AdamW v")
	if !mbf || !vbf {
		panic("cuda: AdamW with one moment in bf16 and the other in f32")
	}
	b1, b2 := float64(hp.Beta1), float64(hp.Beta2)
	c1 := 1 - math.Pow(b1, float64(hp.Step))
	c2 := 1 - math.Pow(b2, float64(hp.Step))
	seed := uint64(hp.Step) * 0x9e3779b97f4a7c15 // the CPU device's
	defer d.enter()()
	copyPtr, _ := d.copyOf(pp, n)
	dbl := func(x float64) uint64 { return math.Float64bits(x) }
	d.launch(kAdamWMomentsBF16, d.elementwiseGrid(n), grid1(256), 0, argPtr(pp), argPtr(copyPtr), argPtr(pg), argPtr(pm), argPtr(pv), argInt64(n),
		dbl(float64(hp.LR)), dbl(b1), dbl(b2), dbl(float64(hp.Eps)), dbl(float64(hp.WeightDecay)), dbl(c1), dbl(c2), dbl(float64(hp.GradScale)), seed)
}

// SumSquares returns Σ x², accumulated in float64, and waits for it. Each
// block writes its own sum and the host adds them in block order, so the
// result has the same bits every run.
func (d *Device) SumSquares(x model.Buffer) float64 {
	n := x.Len()
	px := f32(x, n, "SumSquares x")
	if n == 0 {
		return 0
	}
	defer d.enter()()
	grid := d.elementwiseGrid(n)
	out := d.scratchBuf("sumsq", 2*int(grid.x), F32) // a float64 a block
	d.launch(kSumSquares, grid, grid1(256), 0, argPtr(out.ptr), argPtr(px), argInt64(n))
	part := make([]float64, grid.x)
	d.download(unsafe.Pointer(&part[0]), out.ptr, 8*len(part))
	var s float64
	for _, p := range part {
		s += p
	}
	return s
}
