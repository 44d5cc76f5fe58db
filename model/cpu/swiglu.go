package cpu

import "github.com/r1go/r1go/model"

// SwiGLU: out = silu(gate) ⊙ up with gu[t] = gate[t, :I] | up[t, I:2I]
// (Qwen2's gate_proj and up_proj run as one fused matmul). e^(−gate) of a
// row is taken by the vector expInto first (the same bits as expF of each:
// −g is exact in F), then silu(g)·up by swigluTail (eight lanes at a time
// where the CPU has the kernel, the same bits).
func (d *Device[F]) SwiGLU(out, gu model.Buffer, rows, I int) {
	defer d.timed(opSwiGLU)()
	o, x := buf[F](out), buf[F](gu)
	// Two rows a part at least: a batch-32 decode step spreads over 16
	// cores (with 8 it took at most 4).
	d.parallel(rows, 2, func(lo, hi int) {
		sc := getRow[F](2 * I)
		defer putRow(sc)
		neg, ex := (*sc)[:I], (*sc)[I:]
		for t := lo; t < hi; t++ {
			gate, up, or := x[t*2*I:t*2*I+I], x[t*2*I+I:(t+1)*2*I], o[t*I:(t+1)*I]
			negate(neg, gate)
			expInto(ex, neg)
			swigluTail(or, gate, up, ex)
		}
	})
}

// SwiGLU32 is SwiGLU in float32 arithmetic, the rollout copy's (a model
// whose products round to bf16, LoadOptions.BF16Products): silu(g)·up as
// g / (1 + exp32(−g)) · up with each operation rounded to float32
// (silu32), one pass of sixteen lanes over a row's whole vectors
// (swiglu32AVX512, the same bits; a copy's CPU has AVX-512, as its bf16
// products need), where SwiGLU divides in float64, eight lanes, in a
// second pass: 0.6 of its time on a batch-32 decode step
// (BenchmarkDecodeHostOps, Zen 4 and Xeon) for a relative error of a few
// float32 ulps, which the copy's bf16 products (2⁻⁹) dwarf. The policy's
// forward and backward keep SwiGLU's bits.
func (d *Device[F]) SwiGLU32(out, gu model.Buffer, rows, I int) {
	defer d.timed(opSwiGLU)()
	o, x := buf[F](out), buf[F](gu)
	o32, ok := any(o).([]float32)
	if !ok { // a float64 device: its own arithmetic is no slower
		d.SwiGLU(out, gu, rows, I)
		return
	}
	x32 := any(x).([]float32)
	d.parallel(rows, 2, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			gate, up, or := x32[t*2*I:t*2*I+I], x32[t*2*I+I:(t+1)*2*I], o32[t*I:(t+1)*I]
			done := 0
			if swigluVector && !swigluNoVector {
				if done = I &^ 15; done > 0 && swiglu32AVX512(&or[0], &gate[0], &up[0], done, &expConsts) {
					for i, g := range gate[:done] {
						if -g > expHi { // e^(−g) is exp32's, past the kernel's range
							or[i] = silu32(g, up[i])
						}
					}
				}
			}
			for i := done; i < I; i++ {
				or[i] = silu32(gate[i], up[i])
			}
		}
	})
}

// silu32 is g / (1 + exp32(−g)) · u, each operation rounded to float32.
func silu32(g, u float32) float32 { return g / (1 + exp32(-g)) * u }

// negate sets dst[i] = −src[i], sixteen lanes at a time where the CPU
// has swigluTail's kernels.
func negate[F Float](dst, src []F) {
	done := 0
	if d, ok := any(dst).([]float32); ok && swigluVector && !swigluNoVector {
		s := any(src).([]float32)
		if done = len(s) &^ 15; done > 0 {
			_ = d[done-1]
			negateAVX512(&d[0], &s[0], done)
		}
	}
	for i := done; i < len(src); i++ {
		dst[i] = -src[i]
	}
}

// swigluNoVector turns the vector kernels off (tests).
var swigluNoVector bool

// swigluTail sets out[i] = gate[i] / (1 + ex[i]) · up[i] in float64, rounded
// to F, with ex[i] = e^(−gate[i]): float32 rows go through the vector kernel
// where the CPU has one (the same operations per lane, the same bits), the
// rest element by element.
func swigluTail[F Float](out, gate, up, ex []F) {
	done := 0
	if o, ok := any(out).([]float32); ok && swigluVector && !swigluNoVector {
		g, u, e := any(gate).([]float32), any(up).([]float32), any(ex).([]float32)
		if done = len(o) &^ 7; done > 0 {
			_, _, _ = g[done-1], u[done-1], e[done-1]
			swigluTailAVX512(&o[0], &g[0], &u[0], &e[0], done)
		}
	}
	for i := done; i < len(out); i++ {
		g := float64(gate[i])
		out[i] = F(g / (1 + float64(ex[i])) * float64(up[i]))
	}
}

// SwiGLUBackward: d gate = dy·up·σ(g)(1 + g(1−σ(g))), d up = dy·silu(g).
func (d *Device[F]) SwiGLUBackward(dgu, dout, gu model.Buffer, rows, I int) {
	dx, dy, x := buf[F](dgu), buf[F](dout), buf[F](gu)
	d.parallel(rows, 8, func(lo, hi int) {
		sc := getRow[F](2 * I)
		defer putRow(sc)
		neg, ex := (*sc)[:I], (*sc)[I:]
		for t := lo; t < hi; t++ {
			gate, up := x[t*2*I:t*2*I+I], x[t*2*I+I:(t+1)*2*I]
			dgate, dup, dyr := dx[t*2*I:t*2*I+I], dx[t*2*I+I:(t+1)*2*I], dy[t*I:(t+1)*I]
			negate(neg, gate)
			expInto(ex, neg)
			for i := range dyr {
				g, u, gy := float64(gate[i]), float64(up[i]), float64(dyr[i])
				s := 1 / (1 + float64(ex[i]))
				dgate[i] = F(gy * u * s * (1 + g*(1-s)))
				dup[i] = F(gy * g * s)
			}
		}
	})
}
