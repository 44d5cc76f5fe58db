package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

var (
	kLMHeadStats  = kernel("lmhead.cu", "lmhead_stats", 256)
	kLMHeadFinish = kernel("lmhead.cu", "lmhead_finish", 256)
	kLMHeadGrad   = kernel("lmhead.cu", "lmhead_grad", 256)

	// The logit gradient rounded to bf16 as it is computed, for the two
	// bf16 matmuls of the mixed-precision backward.
	kLMHeadGradBF16 = kernel("lmhead.cu", "lmhead_grad_bf16", 256)
)

// headLogitBudget and headMaxRows bound the fused head's logits block
// (model.HeadBlock). Variables so that tests can force many blocks and
// chunks on small shapes.
var (
	headLogitBudget = model.HeadLogitBudget
	headMaxRows     = model.HeadMaxRows
)

// headGeometry chooses the block of rows and the vocabulary chunk of the
// fused head for T tokens and a vocabulary of V.
func headGeometry(T, V int) (rows, chunk int) {
	return model.HeadBlock(T, V, headLogitBudget, headMaxRows)
}

// noKeptLogits refuses kept logits, which only a device that holds
// model.StoreKeptLogits is given.
func noKeptLogits(logits model.Buffer) {
	if logits != nil {
		panic("cuda: the LM head keeps no logits (the device does not hold model.StoreKeptLogits)")
	}
}

func checkTargets(targets []int32, T, V int) {
	if len(targets) != T {
		panic(fmt.Sprintf("cuda: %d targets for %d tokens", len(targets), T))
	}
	for t, y := range targets {
		if int(y) >= V {
			panic(fmt.Sprintf("cuda: target %d at position %d outside the vocabulary [0, %d)", y, t, V))
		}
	}
}

// LMHead computes per-token logprob of the target and entropy, in blocks
// of rows and chunks of the vocabulary; lse[T] is saved for the backward.
// With bf16 matmul inputs (mixed precision, or a frozen model's bf16 w) a
// block's rows of h are rounded once, for every chunk (headRows). It keeps
// no logits: the device does not hold model.StoreKeptLogits.
func (d *Device) LMHead(logprob, entropy, lse, logits, h, w model.Buffer, targets []int32, T, C, V int) {
	noKeptLogits(logits)
	checkTargets(targets, T, V)
	plp, pent, plse := f32(logprob, T, "LMHead logprob"), f32(entropy, T, "LMHead entropy"), f32(lse, T, "LMHead lse")
	ph := f32(h, T*C, "LMHead h")
	pw, wbf, _ := weightArg(w, V*C, "LMHead w")
	if T == 0 {
		return
	}
	defer d.enter()()
	bf := wbf || d.mixed
	rows, chunk := headGeometry(T, V)
	z := d.scratchBuf("head-logits", rows*chunk, F32)
	st := d.scratchBuf("head-stats", 8*T, F32) // four float64 arrays [T]: max, Σe, Σe·z, z_target
	mx, se, sz, zy := st.ptr, st.ptr+uintptr(8*T), st.ptr+uintptr(16*T), st.ptr+uintptr(24*T)
	pt := d.ints("targets", targets)
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		hr := ph + uintptr(4*t0*C)
		hq := d.headRows(bf, hr, n*C)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			if bf {
				d.gemmBF16(false, true, n, m, C, 1, hq, C, d.headWeights(pw, wbf, v0, m, C), C, 0, z.ptr, F32, m)
			} else {
				d.gemm(false, true, n, m, C, 1, hr, C, pw+uintptr(4*v0*C), C, 0, z.ptr, m)
			}
			first := 0
			if v0 == 0 {
				first = 1
			}
			o := uintptr(8 * t0)
			d.launch(kLMHeadStats, grid1(n), grid1(256), 0, argPtr(z.ptr), argInt(m), argInt(v0), argPtr(pt+uintptr(4*t0)),
				argPtr(mx+o), argPtr(se+o), argPtr(sz+o), argPtr(zy+o), argInt(first))
		}
	}
	d.launch(kLMHeadFinish, grid1(ceilDiv(T, 256)), grid1(256), 0, argPtr(plp), argPtr(pent), argPtr(plse), argPtr(mx), argPtr(se), argPtr(sz), argPtr(zy), argPtr(pt), argInt(T))
}

// headRows returns the bf16 rows of the head's input h (n values at hr)
// when the head's matmuls take bf16 inputs (bf), rounded once into the
// "head-h" scratch for every chunk of the block; 0 otherwise.
func (d *Device) headRows(bf bool, hr uintptr, n int) uintptr {
	if !bf {
		return 0
	}
	return d.bf16Operand(hr, n, "head-h")
}

// headWeights returns the bf16 address of rows [v0, v0+m) of the head's
// weights at pw ([V, C]): the rows themselves when they are bf16 (wbf, a
// frozen model), else their registered copy, else (unregistered float32
// weights) the rows rounded into the "mixed-b" scratch.
func (d *Device) headWeights(pw uintptr, wbf bool, v0, m, C int) uintptr {
	if wbf {
		return pw + uintptr(2*v0*C)
	}
	return d.bf16Operand(pw+uintptr(4*v0*C), m*C, "mixed-b")
}

// LMHeadBackward sets dh and accumulates dw (none for a nil dw) from
// d/dlogprob and d/dentropy, recomputing each chunk's logits. In mixed precision the chunk's logit
// gradient is written once, rounded to bf16 (lmhead_grad_bf16), into the
// "head-grad" scratch that both matmuls read as it is, and h is rounded
// once per block of rows (headRows): the same bf16 operands as rounding
// each on its way into each matmul, without the float32 gradient's
// write and its two re-reads.
func (d *Device) LMHeadBackward(dh, dw, dlogprob, dentropy, logits, h, w, lse, entropy model.Buffer, targets []int32, T, C, V int) {
	noKeptLogits(logits)
	checkTargets(targets, T, V)
	pdh, pdw := f32(dh, T*C, "LMHeadBackward dh"), f32OrNil(dw, V*C, "LMHeadBackward dw")
	pglp, pgent := f32(dlogprob, T, "LMHeadBackward dlogprob"), f32(dentropy, T, "LMHeadBackward dentropy")
	ph, pw := f32(h, T*C, "LMHeadBackward h"), f32(w, V*C, "LMHeadBackward w")
	plse, pent := f32(lse, T, "LMHeadBackward lse"), f32(entropy, T, "LMHeadBackward entropy")
	if T == 0 {
		return
	}
	defer d.enter()()
	bf := d.mixed
	rows, chunk := headGeometry(T, V)
	z := d.scratchBuf("head-logits", rows*chunk, F32)
	var g Buffer
	if bf {
		g = d.scratchBuf("head-grad", rows*chunk, BF16)
	}
	pt := d.ints("targets", targets)
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		o := uintptr(4 * t0)
		hr, dhr := ph+uintptr(4*t0*C), pdh+uintptr(4*t0*C)
		hq := d.headRows(bf, hr, n*C)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			beta := float32(1)
			if v0 == 0 {
				beta = 0
			}
			grad := []uint64{argPtr(z.ptr), argInt(n), argInt(m), argInt(v0), argPtr(pt + o), argPtr(plse + o), argPtr(pent + o), argPtr(pglp + o), argPtr(pgent + o)}
			dwc := pdw + uintptr(4*v0*C)
			if !bf {
				wc := pw + uintptr(4*v0*C)
				d.gemm(false, true, n, m, C, 1, hr, C, wc, C, 0, z.ptr, m)
				d.launch(kLMHeadGrad, d.elementwiseGrid(n*m), grid1(256), 0, grad...)
				d.gemm(false, false, n, C, m, 1, z.ptr, m, wc, C, beta, dhr, C)
				if pdw != 0 {
					d.gemm(true, false, m, C, n, 1, z.ptr, m, hr, C, 1, dwc, C)
				}
				continue
			}
			wq := d.headWeights(pw, false, v0, m, C)
			d.gemmBF16(false, true, n, m, C, 1, hq, C, wq, C, 0, z.ptr, F32, m)
			d.launch(kLMHeadGradBF16, d.elementwiseGrid(n*m), grid1(256), 0, append([]uint64{argPtr(g.ptr)}, grad...)...)
			d.gemmBF16(false, false, n, C, m, 1, g.ptr, m, wq, C, beta, dhr, F32, C)
			if pdw != 0 {
				d.gemmBF16(true, false, m, C, n, 1, g.ptr, m, hq, C, 1, dwc, F32, C)
			}
		}
	}
}
