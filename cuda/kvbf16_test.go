package cuda

import (
	"math"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// TestGPUAttentionCachedBF16 runs TestGPUAttentionCached's steps (prefill
// of two slots with the tiled kernel, then decode steps and a mixed step)
// against a KV cache stored in bf16, as AllocCompute gives under mixed
// precision, beside the CPU's float32 cache. The stored keys and values
// must be exactly the CPU's rounded to bf16. The output's stated bound,
// per row t and query head h, from the rounding of k and v alone (|δk| ≤
// u|k|, |δv| ≤ u|v|, u = 2^−8): scores move by at most δs = u·scale·max_j
// Σ_d|q_d·k_jd|, which moves each softmax weight by at most a factor
// e^{±2δs}, so
//
//	|Δout_d| ≤ (u + 4·δs)·max_j|v_jd| + float32 slack (2^−17·max_j|v_jd|).
func TestGPUAttentionCachedBF16(t *testing.T) {
	e := newOpEnv(t)
	NH, KVH, HS := 14, 2, 64
	slots, maxLen := 4, 64
	W, kvw := (NH+2*KVH)*HS, KVH*HS
	scale := 1 / math.Sqrt(float64(HS))
	ckc, cvc := upload(e.cpu, make([]float32, slots*maxLen*kvw)), upload(e.cpu, make([]float32, slots*maxLen*kvw))
	gkc, gvc := e.gpu.AllocType(slots*maxLen*kvw, BF16), e.gpu.AllocType(slots*maxLen*kvw, BF16)
	defer e.gpu.Free(gkc)
	defer e.gpu.Free(gvc)
	steps := []struct{ slots, pos0, lens []int32 }{
		{[]int32{2, 0}, []int32{0, 0}, []int32{19, 11}},
		{[]int32{0, 2}, []int32{11, 19}, []int32{1, 1}},
		{[]int32{2, 0, 3}, []int32{20, 12, 0}, []int32{1, 9, 1}},
	}
	for s, st := range steps {
		T := 0
		for _, n := range st.lens {
			T += int(n)
		}
		q := e.randn(T*W, 1)
		cq, gq := e.pair(q)
		co, gout := e.pair(make([]float32, T*NH*HS))
		e.cpu.AttentionCached(co, cq, nil, ckc, cvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		e.gpu.AttentionCached(gout, gq, nil, gkc, gvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
		if err := e.gpu.Sync(); err != nil {
			t.Fatal(err)
		}
		kc, vc := download(e.cpu, ckc), download(e.cpu, cvc)
		for name, pair := range map[string][2]any{"keys": {kc, gkc}, "values": {vc, gvc}} {
			want, got := pair[0].([]float32), downloadBF16(e.gpu, pair[1].(Buffer))
			for i := range want {
				if got[i] != bf16.Round(want[i]) {
					t.Fatalf("step %d: cached %s[%d] = %g, want bf16(%g) = %g", s, name, i, got[i], want[i], bf16.Round(want[i]))
				}
			}
		}
		want, got := download(e.cpu, co), download(e.gpu, gout)
		worst, row := 0.0, 0
		for j, n := range st.lens {
			base := int(st.slots[j]) * maxLen
			for i := 0; i < int(n); i, row = i+1, row+1 {
				keys := int(st.pos0[j]) + i + 1
				for h := 0; h < NH; h++ {
					kvh := h / (NH / KVH)
					var sMax, vMax float64
					for k := 0; k < keys; k++ {
						var dot float64
						for d := 0; d < HS; d++ {
							dot += math.Abs(float64(q[row*W+h*HS+d]) * float64(kc[(base+k)*kvw+kvh*HS+d]))
							vMax = math.Max(vMax, math.Abs(float64(vc[(base+k)*kvw+kvh*HS+d])))
						}
						sMax = math.Max(sMax, dot)
					}
					ds := bf16U * scale * sMax
					bound := (bf16U+4*ds)*vMax + math.Ldexp(vMax, -17)
					for d := 0; d < HS; d++ {
						i := row*NH*HS + h*HS + d
						diff := math.Abs(float64(got[i]) - float64(want[i]))
						if !(diff <= bound) {
							t.Fatalf("step %d row %d head %d col %d: bf16-cache output %g, CPU %g, |Δ| %.3g > bound %.3g", s, row, h, d, got[i], want[i], diff, bound)
						}
						worst = math.Max(worst, diff/bound)
					}
				}
			}
		}
		t.Logf("step %d: bf16 KV cache output within %.3g of its bound (relative error %.3g)", s, worst, relErr(got, want))
	}
}

// downloadBF16 reads a bf16 buffer back as float32 (exact widening).
func downloadBF16(d *Device, b Buffer) []float32 {
	f := d.Alloc(b.Len())
	defer d.Free(f)
	d.Convert(f.(Buffer), b)
	return download(d, f)
}
