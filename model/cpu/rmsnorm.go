package cpu

import (
	"math"

	"github.com/r1go/r1go/model"
)

// RMSNorm, as Qwen2 computes it in float32: y = w ⊙ x·r with
// r = 1/sqrt(mean(x²) + eps); r is saved per row for the backward. With
// resid, x = inp + resid is Add's into sum first: the same bits as the two
// ops.
func (d *Device[F]) RMSNorm(out, sum, rstd, inp, resid, w model.Buffer, rows, C int, eps float32) {
	if resid != nil {
		d.Add(sum, inp, resid)
		inp = sum
	}
	defer d.timed(opRMSNorm)()
	o, rs, x := buf[F](out), buf[F](rstd), buf[F](inp)
	g, gp := vec[F](w)
	defer putVec(gp)
	o32, _ := any(o).([]float32)
	x32, _ := any(x).([]float32)
	g32, _ := any(g).([]float32)
	vector := x32 != nil && rmsVector && !rmsNoVector
	d.parallel(rows, 16, func(lo, hi int) {
		finish := func(t int, ss float64) {
			r := 1 / math.Sqrt(ss/float64(C)+float64(eps))
			rs[t] = F(r)
			c := 0
			if n16 := C / 16; vector && n16 > 0 {
				scaleRowAVX512(&o32[t*C], &x32[t*C], &g32[0], n16, r)
				c = 16 * n16
			}
			or := o[t*C : (t+1)*C]
			for ; c < C; c++ {
				or[c] = F(float64(x[t*C+c])*r) * g[c]
			}
		}
		t := lo
		if vector {
			for ; t+8 <= hi; t += 8 {
				for i, s := range sumSquares8(x32[t*C:(t+8)*C], C) {
					finish(t+i, s)
				}
			}
		}
		for ; t+4 <= hi; t += 4 {
			ss := sumSquares4(x[t*C:(t+4)*C], C)
			for i, s := range ss {
				finish(t+i, s)
			}
		}
		for ; t < hi; t++ {
			finish(t, sumSquares(x[t*C:(t+1)*C]))
		}
	})
}

// sumSquares is Σ x² in float64, in order.
func sumSquares[F Float](x []F) float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return ss
}

// rmsNoVector makes RMSNorm take its Go loops on every CPU: the tests'
// reference.
var rmsNoVector bool

// sumSquares8 is sumSquares of eight rows of C (x, one after another) at
// once, a lane a row (sumSquares8AVX512), each in its row's order: each
// sum has sumSquares's bits (a decode step norms 32 rows at a time:
// BenchmarkRMSNormDecode).
func sumSquares8(x []float32, C int) [8]float64 {
	var ss [8]float64
	n8 := C / 8
	if n8 > 0 {
		sumSquares8AVX512(&x[0], uintptr(C)*4, n8, &ss)
	}
	for i := range ss {
		for _, v := range x[i*C+8*n8 : (i+1)*C] {
			ss[i] += float64(v) * float64(v)
		}
	}
	return ss
}

// sumSquares4 is sumSquares of four rows of C (x, one after another) at
// once: four independent chains of additions instead of one (a decode
// step's norms of 32 rows were a chain of 896 dependent additions each),
// each in its row's order, so each sum has sumSquares's bits.
func sumSquares4[F Float](x []F, C int) [4]float64 {
	x0, x1, x2, x3 := x[:C], x[C:2*C], x[2*C:3*C], x[3*C:4*C]
	var s0, s1, s2, s3 float64
	for c := range x0 {
		v0, v1, v2, v3 := float64(x0[c]), float64(x1[c]), float64(x2[c]), float64(x3[c])
		s0 += v0 * v0
		s1 += v1 * v1
		s2 += v2 * v2
		s3 += v3 * v3
	}
	return [4]float64{s0, s1, s2, s3}
}

// RMSNormBackward: with n = x·r,
// dx = r·(w⊙dy − n·mean(n⊙w⊙dy)), dw += Σ_rows dy⊙n.
// dw is reduced per block of rows first, then over the blocks in order, so
// that workers never share a row of it and the sum does not depend on which
// worker finishes first (runs are bit-for-bit reproducible). With resid
// each dx is rounded to F, then added to resid's value (which dinp may
// hold): the bits of the backward into a scratch, then Add.
func (d *Device[F]) RMSNormBackward(dinp, dinpc, dw, dout, inp, w, rstd, resid model.Buffer, rows, C int) {
	dx, dg, dy, x, rs, res := buf[F](dinp), buf[F](dw), buf[F](dout), buf[F](inp), buf[F](rstd), buf[F](resid)
	g, gp := vec[F](w)
	defer putVec(gp)
	const block = 64
	nb := (rows + block - 1) / block
	partial := make([]float64, nb*C)
	d.parallel(nb, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			acc := partial[b*C : (b+1)*C]
			for t := b * block; t < min((b+1)*block, rows); t++ {
				r := float64(rs[t])
				xr, dyr, dxr := x[t*C:(t+1)*C], dy[t*C:(t+1)*C], dx[t*C:(t+1)*C]
				var dot float64
				for c := range xr {
					n := float64(xr[c]) * r
					gd := float64(g[c]) * float64(dyr[c])
					dot += n * gd
					acc[c] += float64(dyr[c]) * n
				}
				dot /= float64(C)
				for c := range xr {
					n := float64(xr[c]) * r
					v := F(r * (float64(g[c])*float64(dyr[c]) - n*dot))
					if res != nil {
						v = res[t*C+c] + v
					}
					dxr[c] = v
				}
			}
		}
	})
	if dinpc != nil { // a compute view (the CPU holds none: a plain copy)
		d.Copy(dinpc, dinp)
	}
	if dg == nil { // a frozen weight: only dx is wanted
		return
	}
	for c := 0; c < C; c++ {
		var s float64
		for b := 0; b < nb; b++ {
			s += partial[b*C+c]
		}
		dg[c] += F(s)
	}
}
