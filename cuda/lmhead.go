package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

var (
	kLMHeadStats  = kernel("lmhead.cu", "lmhead_stats", 256)
	kLMHeadFinish = kernel("lmhead.cu", "lmhead_finish", 256)
	kLMHeadGrad   = kernel("lmhead.cu", "lmhead_grad", 256)
)

// headLogitBudget caps the logits block of the fused head (rows × chunk
// float32 values, 128 MiB): big enough that each cuBLAS call is a large
// GEMM, small next to the memory that [T, V] logits would take. Variables
// so that tests can force many blocks and chunks on small shapes.
var (
	headLogitBudget = 32 << 20
	headMaxRows     = 2048
)

// headGeometry chooses the block of rows and the vocabulary chunk of the
// fused head for T tokens and a vocabulary of V.
func headGeometry(T, V int) (rows, chunk int) {
	rows = max(1, min(T, headMaxRows))
	chunk = min(V, max(128, headLogitBudget/rows/128*128))
	return rows, chunk
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
func (d *Device) LMHead(logprob, entropy, lse, h, w model.Buffer, targets []int32, T, C, V int) {
	checkTargets(targets, T, V)
	plp, pent, plse := f32(logprob, T, "LMHead logprob"), f32(entropy, T, "LMHead entropy"), f32(lse, T, "LMHead lse")
	ph := f32(h, T*C, "LMHead h")
	pw, wbf, es := weightArg(w, V*C, "LMHead w")
	if T == 0 {
		return
	}
	defer d.enter()()
	rows, chunk := headGeometry(T, V)
	z := d.scratchBuf("head-logits", rows*chunk, F32)
	st := d.scratchBuf("head-stats", 8*T, F32) // four float64 arrays [T]: max, Σe, Σe·z, z_target
	mx, se, sz, zy := st.ptr, st.ptr+uintptr(8*T), st.ptr+uintptr(16*T), st.ptr+uintptr(24*T)
	pt := d.ints("targets", targets)
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			d.gemmW(false, true, n, m, C, 1, ph+uintptr(4*t0*C), C, pw+uintptr(es*v0*C), wbf, C, 0, z.ptr, m)
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

// LMHeadBackward sets dh and accumulates dw from d/dlogprob and d/dentropy,
// recomputing each chunk's logits.
func (d *Device) LMHeadBackward(dh, dw, dlogprob, dentropy, h, w, lse, entropy model.Buffer, targets []int32, T, C, V int) {
	checkTargets(targets, T, V)
	pdh, pdw := f32(dh, T*C, "LMHeadBackward dh"), f32(dw, V*C, "LMHeadBackward dw")
	pglp, pgent := f32(dlogprob, T, "LMHeadBackward dlogprob"), f32(dentropy, T, "LMHeadBackward dentropy")
	ph, pw := f32(h, T*C, "LMHeadBackward h"), f32(w, V*C, "LMHeadBackward w")
	plse, pent := f32(lse, T, "LMHeadBackward lse"), f32(entropy, T, "LMHeadBackward entropy")
	if T == 0 {
		return
	}
	defer d.enter()()
	rows, chunk := headGeometry(T, V)
	z := d.scratchBuf("head-logits", rows*chunk, F32)
	pt := d.ints("targets", targets)
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		o := uintptr(4 * t0)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			wc := pw + uintptr(4*v0*C)
			d.gemm(false, true, n, m, C, 1, ph+uintptr(4*t0*C), C, wc, C, 0, z.ptr, m)
			d.launch(kLMHeadGrad, d.elementwiseGrid(n*m), grid1(256), 0, argPtr(z.ptr), argInt(n), argInt(m), argInt(v0), argPtr(pt+o),
				argPtr(plse+o), argPtr(pent+o), argPtr(pglp+o), argPtr(pgent+o))
			beta := float32(1)
			if v0 == 0 {
				beta = 0
			}
			d.gemm(false, false, n, C, m, 1, z.ptr, m, wc, C, beta, pdh+uintptr(4*t0*C), C)
			d.gemm(true, false, m, C, n, 1, z.ptr, m, ph+uintptr(4*t0*C), C, 1, pdw+uintptr(4*v0*C), C)
		}
	}
}

// Logits writes full logits[len(rows), V] for the chosen rows of h: the
// rows are gathered (the embedding kernel, with h as the table), then one GEMM.
func (d *Device) Logits(logits, h, w model.Buffer, rows []int32, C, V int) {
	checkIDs(rows, h.Len()/C, "row")
	pl, ph := f32(logits, len(rows)*V, "Logits logits"), f32(h, -1, "Logits h")
	pw, wbf, _ := weightArg(w, V*C, "Logits w")
	if len(rows) == 0 {
		return
	}
	defer d.enter()()
	g := d.scratchBuf("logits-rows", len(rows)*C, F32)
	d.launch(kEmbeddingForward, grid1(len(rows)), grid1(min(256, roundUp(C, 32))), 0, argPtr(g.ptr), argPtr(d.ints("rows", rows)), argPtr(ph), argInt(C))
	d.gemmW(false, true, len(rows), V, C, 1, g.ptr, C, pw, wbf, C, 0, pl, V)
}
