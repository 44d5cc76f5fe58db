package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rmsNormRows is RMSNorm's forward a row at a time, as it was written
// before the rows went four at a time: the reference for its bits.
func rmsNormRows(o, rs, x, g []float32, rows, C int, eps float32) {
	for t := range rows {
		xr := x[t*C : (t+1)*C]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		r := 1 / math.Sqrt(ss/float64(C)+float64(eps))
		rs[t] = float32(r)
		for c, v := range xr {
			o[t*C+c] = float32(float64(v)*r) * g[c]
		}
	}
}

// TestRMSNormSameBitsAsRowLoop compares the float32 device's RMSNorm
// (rows eight at a time in vector lanes where the CPU can, then four, then
// one; outputs sixteen at a time) with the row-by-row loop, bit for bit,
// for 1 to 70 rows on 1 to 3 threads (parts with and without a remainder
// of rows) and rows of 7, 64 and 896. A last bit of the float64 sum
// seldom reaches a float32 output, so the sums of four and of eight rows
// are also compared with sumSquares's directly.
func TestRMSNormSameBitsAsRowLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 200 {
		C := 1 + r.IntN(900)
		x := make([]float32, 8*C)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp(2*r.NormFloat64()))
		}
		got := sumSquares4(x, C)
		for i, s := range got {
			if want := sumSquares(x[i*C : (i+1)*C]); math.Float64bits(s) != math.Float64bits(want) {
				t.Fatalf("trial %d, rows of %d: row %d's sum of squares is %v, sumSquares %v", trial, C, i, s, want)
			}
		}
		if !rmsVector {
			continue
		}
		for i, s := range sumSquares8(x, C) {
			if want := sumSquares(x[i*C : (i+1)*C]); math.Float64bits(s) != math.Float64bits(want) {
				t.Fatalf("trial %d, rows of %d: row %d's sum of squares is %v in eight rows, sumSquares %v", trial, C, i, s, want)
			}
		}
	}
	for _, threads := range []int{1, 2, 3} {
		d := &Device[float32]{threads: threads}
		for rows := 1; rows <= 70; rows += 1 + rows/8 {
			C := []int{7, 64, 896}[rows%3]
			x, g := make([]float32, rows*C), make([]float32, C)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()))
			}
			for i := range g {
				g[i] = float32(1 + 0.1*r.NormFloat64())
			}
			out, rstd := make([]float32, rows*C), make([]float32, rows)
			wantOut, wantRstd := make([]float32, rows*C), make([]float32, rows)
			d.RMSNorm(cpuBuf[float32](out), nil, cpuBuf[float32](rstd), cpuBuf[float32](x), nil, cpuBuf[float32](g), rows, C, 1e-6)
			rmsNormRows(wantOut, wantRstd, x, g, rows, C, 1e-6)
			for i := range out {
				if math.Float32bits(out[i]) != math.Float32bits(wantOut[i]) {
					t.Fatalf("%d threads, %d rows of %d: output %d is %v, the row loop's %v", threads, rows, C, i, out[i], wantOut[i])
				}
			}
			for i := range rstd {
				if math.Float32bits(rstd[i]) != math.Float32bits(wantRstd[i]) {
					t.Fatalf("%d threads, %d rows of %d: r of row %d is %v, the row loop's %v", threads, rows, C, i, rstd[i], wantRstd[i])
				}
			}
		}
	}
}

// TestRMSNormResidSameBitsAsAdd: RMSNorm with a residual is Add then the
// plain norm, and RMSNormBackward with one (resid aliasing dinp, as in the
// layer) is the plain backward into a scratch then Add, bit for bit, dw
// and the plain path's dinpc copy included.
func TestRMSNormResidSameBitsAsAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	d := &Device[float32]{threads: 2}
	rows, C := 37, 96
	randn := func(n int) cpuBuf[float32] {
		x := make(cpuBuf[float32], n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	clone := func(x cpuBuf[float32]) cpuBuf[float32] { return append(cpuBuf[float32](nil), x...) }
	same := func(what string, got, want cpuBuf[float32]) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	a, b, w := randn(rows*C), randn(rows*C), randn(C)
	sum, out, rs := make(cpuBuf[float32], rows*C), make(cpuBuf[float32], rows*C), make(cpuBuf[float32], rows)
	d.RMSNorm(out, sum, rs, a, b, w, rows, C, 1e-6)
	wsum, wout, wrs := make(cpuBuf[float32], rows*C), make(cpuBuf[float32], rows*C), make(cpuBuf[float32], rows)
	d.Add(wsum, a, b)
	d.RMSNorm(wout, nil, wrs, wsum, nil, w, rows, C, 1e-6)
	same("sum", sum, wsum)
	same("out", out, wout)
	same("rstd", rs, wrs)

	dy, dx := randn(rows*C), randn(rows*C)
	dw := randn(C)
	wdx, wdw, tmp := clone(dx), clone(dw), make(cpuBuf[float32], rows*C)
	dxc := make(cpuBuf[float32], rows*C)
	d.RMSNormBackward(dx, dxc, dw, dy, sum, w, rs, dx, rows, C)
	d.RMSNormBackward(tmp, nil, wdw, dy, wsum, w, wrs, nil, rows, C)
	d.Add(wdx, wdx, tmp)
	same("dinp", dx, wdx)
	same("dinpc", dxc, wdx)
	same("dw", dw, wdw)
}

// BenchmarkRMSNormDecode times a batch-32 decode step's norm (32 rows of
// Qwen2.5-0.5B's 896): the device's (eight rows in vector lanes where the
// CPU can, else four), its Go loops (rmsNoVector: four rows at a time) and
// the row loop they replaced, one thread each.
func BenchmarkRMSNormDecode(b *testing.B) {
	const rows, C = 32, 896
	r := rand.New(rand.NewPCG(1, 2))
	x, g := make([]float32, rows*C), make([]float32, C)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range g {
		g[i] = 1
	}
	out, rstd := make([]float32, rows*C), make([]float32, rows)
	d := &Device[float32]{threads: 1}
	b.Run("device", func(b *testing.B) {
		for b.Loop() {
			d.RMSNorm(cpuBuf[float32](out), nil, cpuBuf[float32](rstd), cpuBuf[float32](x), nil, cpuBuf[float32](g), rows, C, 1e-6)
		}
	})
	b.Run("four-rows", func(b *testing.B) {
		rmsNoVector = true
		defer func() { rmsNoVector = false }()
		for b.Loop() {
			d.RMSNorm(cpuBuf[float32](out), nil, cpuBuf[float32](rstd), cpuBuf[float32](x), nil, cpuBuf[float32](g), rows, C, 1e-6)
		}
	})
	b.Run("row-loop", func(b *testing.B) {
		for b.Loop() {
			rmsNormRows(out, rstd, x, g, rows, C, 1e-6)
		}
	})
}
