package cpu

// attnKernels is one tier's set of attendGroup32's kernels (attn_amd64.s
// for avx512, attn_avx2_amd64.s for avx2): the same arithmetic per head as
// AttentionCached's loops, each set with its own layout of the queries.
type attnKernels struct {
	name string
	// packQ lays out nh ≤ attnGroup query rows of HS (q) for dots, zeros
	// for the heads past nh; qp holds HS·attnGroup floats.
	packQ func(qp, q []float32, nh, HS int)
	// dots: out[8i + h] = dot(q_h, key i) for n keys ldk bytes apart.
	dots func(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)
	// axpy: acc[h·hs + c] += e[8i + h]·v_i[c], keys in order.
	axpy func(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)
	// scores, args and weights are softmaxGroupLoops in three passes.
	scores  func(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)
	args    func(p *float64, arg *float32, n int, m *[8]float64)
	weights func(ex *float32, p *float64, n int, sum *[8]float64)
}

// attn32 is the set AttentionCached uses against a float32 cache: the
// best this CPU runs at the tier R1GO_CPU leaves (nil: the loops). Tests
// swap in the others.
var attn32 = func() *attnKernels {
	if ks := attnKernelSets(); len(ks) > 0 {
		return ks[0]
	}
	return nil
}()

// packQAVX512 lays the queries out chunk by chunk: chunk c holds each
// head's values 4c..4c+3, heads in order (a head a 128-bit lane).
func packQAVX512(qp, q []float32, nh, HS int) {
	const G = attnGroup
	for c := 0; c < HS/4; c++ {
		for h := 0; h < G; h++ {
			dst := qp[(c*G+h)*4:][:4]
			if h < nh {
				copy(dst, q[h*HS+4*c:][:4])
			} else {
				clear(dst)
			}
		}
	}
}

// packQAVX2 lays the queries out value by value: qp[8p + h] = q_h[p] (a
// vector of the eight heads' p-th values, partial sum p mod 4 of each).
func packQAVX2(qp, q []float32, nh, HS int) {
	const G = attnGroup
	for p := 0; p < HS; p++ {
		row := qp[p*G:][:G]
		for h := 0; h < G; h++ {
			if h < nh {
				row[h] = q[h*HS+p]
			} else {
				row[h] = 0
			}
		}
	}
}
