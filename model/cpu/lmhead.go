package cpu

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/model"
)

// The fused LM head. Logits z = h·wᵀ are produced for a block of tokens and
// a chunk of the vocabulary at a time and folded into running statistics per
// token (max, Σe^(z−max), Σe^(z−max)·z, the target's logit), so [T, V]
// logits never exist at once. From those: lse = log Σ e^z, the target's
// logprob z_y − lse, and the entropy H = lse − E_p[z].
//
// Backward, per logit: d logprob/dz_v = 1[v=y] − p_v and
// dH/dz_v = −p_v·(z_v − E_p[z]), with p_v = e^(z_v − lse) and
// E_p[z] = lse − H recovered from the saved lse and H.

const (
	headRows  = 256  // tokens per block
	headChunk = 4096 // vocabulary entries per chunk
)

// LMHead computes each block's chunk of logits into a scratch block, or,
// with keep (logits kept for the backward, model.StoreKeptLogits), into
// its place in keep (row pitch V).
func (d *Device[F]) LMHead(logprob, entropy, lse, keep, h, w model.Buffer, targets []int32, T, C, V int) {
	lp, ent, L := buf[F](logprob), buf[F](entropy), buf[F](lse)
	checkTargets(targets, T, V)
	rows := min(T, headRows)
	chunk := min(V, headChunk)
	var z model.Buffer
	if keep == nil {
		z = cpuBuf[F](make([]F, rows*chunk))
	}
	mx, se, sz, zy := make([]float64, rows), make([]float64, rows), make([]float64, rows), make([]float64, rows)
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		for i := range n {
			mx[i], se[i], sz[i], zy[i] = math.Inf(-1), 0, 0, 0
		}
		hb := h.Slice(t0*C, n*C)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			zb, ldz := z, m
			if keep != nil {
				zb, ldz = keep.Slice(t0*V+v0, (n-1)*V+m), V
			}
			d.Gemm(false, true, n, m, C, 1, hb, C, w.Slice(v0*C, m*C), C, 0, zb, ldz)
			zs := buf[F](zb)
			d.parallel(n, 1, func(lo, hi int) {
				sc := getRow[F](2 * m)
				defer putRow(sc)
				arg, ex := (*sc)[:m], (*sc)[m:]
				for i := lo; i < hi; i++ {
					row := zs[i*ldz : i*ldz+m]
					cm := math.Inf(-1)
					for _, v := range row {
						cm = max(cm, float64(v)) // the builtin: math.Max's rules for NaN and ±0, inlined
					}
					nm := math.Max(mx[i], cm)
					r := math.Exp(mx[i] - nm) // rescale what came before
					s, sv := se[i]*r, sz[i]*r
					for j, v := range row {
						arg[j] = F(float64(v) - nm)
					}
					expInto(ex, arg)
					for j, v := range row {
						e := float64(ex[j])
						s += e
						sv += e * float64(v)
					}
					mx[i], se[i], sz[i] = nm, s, sv
					if y := int(targets[t0+i]) - v0; y >= 0 && y < m {
						zy[i] = float64(row[y])
					}
				}
			})
		}
		for i := range n {
			l := mx[i] + math.Log(se[i])
			L[t0+i] = F(l)
			ent[t0+i] = F(l - sz[i]/se[i])
			if targets[t0+i] >= 0 {
				lp[t0+i] = F(zy[i] - l)
			} else {
				lp[t0+i] = 0
			}
		}
	}
}

// LMHeadBackward computes each block's chunk of logits again into a
// scratch block or, with keep (the logits LMHead kept), takes it from keep
// (row pitch V); the chunk's logit gradients overwrite it.
func (d *Device[F]) LMHeadBackward(dh, dw, dlogprob, dentropy, keep, h, w, lse, entropy model.Buffer, targets []int32, T, C, V int) {
	glp, gent, L, H := buf[F](dlogprob), buf[F](dentropy), buf[F](lse), buf[F](entropy)
	checkTargets(targets, T, V)
	rows := min(T, headRows)
	chunk := min(V, headChunk)
	var z model.Buffer
	if keep == nil {
		z = cpuBuf[F](make([]F, rows*chunk))
	}
	for t0 := 0; t0 < T; t0 += rows {
		n := min(rows, T-t0)
		hb, dhb := h.Slice(t0*C, n*C), dh.Slice(t0*C, n*C)
		for v0 := 0; v0 < V; v0 += chunk {
			m := min(chunk, V-v0)
			wc := w.Slice(v0*C, m*C)
			zb, ldz := z, m
			if keep != nil {
				zb, ldz = keep.Slice(t0*V+v0, (n-1)*V+m), V
			} else {
				d.Gemm(false, true, n, m, C, 1, hb, C, wc, C, 0, zb, ldz)
			}
			zs := buf[F](zb)
			d.parallel(n, 1, func(lo, hi int) {
				sc := getRow[F](2 * m)
				defer putRow(sc)
				arg, ex := (*sc)[:m], (*sc)[m:]
				for i := lo; i < hi; i++ {
					t := t0 + i
					l, ez := float64(L[t]), float64(L[t])-float64(H[t])
					gl, ge := float64(glp[t]), float64(gent[t])
					y := int(targets[t]) - v0
					if targets[t] < 0 {
						gl = 0
					}
					row := zs[i*ldz : i*ldz+m]
					for v, zv := range row {
						arg[v] = F(float64(zv) - l)
					}
					expInto(ex, arg)
					for v, zv := range row {
						p := float64(ex[v])
						g := -gl*p - ge*p*(float64(zv)-ez)
						if v == y {
							g += gl
						}
						row[v] = F(g)
					}
				}
			})
			// dh (=, then +=) from dz·W; dW += dzᵀ·h.
			beta := float32(1)
			if v0 == 0 {
				beta = 0
			}
			d.Gemm(false, false, n, C, m, 1, zb, ldz, wc, C, beta, dhb, C)
			if dw != nil { // nil: a frozen head, only dh is wanted
				d.Gemm(true, false, m, C, n, 1, zb, ldz, hb, C, 1, dw.Slice(v0*C, m*C), C)
			}
		}
	}
}

func checkTargets(targets []int32, T, V int) {
	if len(targets) != T {
		panic(fmt.Sprintf("cpu: %d targets for %d tokens", len(targets), T))
	}
	for t, y := range targets {
		if int(y) >= V {
			panic(fmt.Sprintf("cpu: target %d at position %d outside the vocabulary [0, %d)", y, t, V))
		}
	}
}
