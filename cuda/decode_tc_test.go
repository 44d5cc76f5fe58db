package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// The tensor-core decode attention (attention_decode_tc.cu) against the
// CPU device in float32 on the same bf16 values: q, k and v rounded to
// bf16 widen exactly, so the CPU's result is the exact attention of the
// kernel's operands up to float32 rounding. The kernel's own error is the
// bf16 hi + lo split of the probabilities (|p − hi − lo| ≤ 2^−18·p), the
// approximate exp2 (2^−22) and float32 sums, so each output is within
// 2^−16·max|v| of the CPU's before its rounding to bf16 (2^−8·|x|):
// checkDecodeOut's bound. A bf16 P alone would miss it by far (2^−9).

// checkDecodeOut requires |got − want| ≤ 2^−8·|want| + 2^−16·vmax for each
// value of the bf16 GPU output g against the CPU's float32 c.
func (e *opEnv) checkDecodeOut(what string, c model.Buffer, g Buffer, vmax float64) {
	e.t.Helper()
	if err := e.gpu.Sync(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	want, got := download(e.cpu, c), downloadBF16(e.gpu, g)
	worst := 0.0
	for i := range want {
		bound := math.Ldexp(math.Abs(float64(want[i])), -8) + math.Ldexp(vmax, -16)
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= bound) {
			e.t.Fatalf("%s[%d] = %g, CPU %g: |Δ| %.3g > %.3g", what, i, got[i], want[i], d, bound)
		}
		worst = math.Max(worst, d/bound)
	}
	e.t.Logf("%s: within %.2f of the bound, relative error %.3g", what, worst, relErr(got, want))
}

// decodeRows is one decode step: row j continues slot slots[j], which
// holds keys[j]−1 positions, with one token.
func decodeRows(slots []int32, keys []int) (pos0, lens []int32) {
	for _, n := range keys {
		pos0, lens = append(pos0, int32(n-1)), append(lens, 1)
	}
	return pos0, lens
}

// maxAbs is the largest |x|.
func maxAbs(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// TestGPUDecodeTCAttention decodes one token for five slots at different
// positions (contexts 1, 37, 64, 65 and 130 keys: a lone new key, whole
// and partial 64-key tiles) with the planned split and with 2, 3 and 5
// splits, which leave splits that hold only the new key and empty ones,
// for the group sizes of Qwen2.5-0.5B (7, head size 64) and 1.5B (6, 128),
// MHA (1) and a full mma tile (16). The cache gets exactly the rounded
// keys and values; the output is checked as checkDecodeOut says.
func TestGPUDecodeTCAttention(t *testing.T) {
	e := newOpEnv(t)
	defer func(s int) { decodeForceSplits = s }(decodeForceSplits)
	slots := []int32{3, 0, 4, 1, 2}
	keys := []int{1, 37, 64, 65, 130}
	const nslots, maxLen = 5, 136
	pos0, lens := decodeRows(slots, keys)
	for _, sh := range []struct{ NH, KVH, HS int }{{14, 2, 64}, {12, 2, 128}, {4, 4, 64}, {16, 1, 64}} {
		NH, KVH, HS := sh.NH, sh.KVH, sh.HS
		W, kvw, T := (NH+2*KVH)*HS, KVH*HS, len(slots)
		ckc, gkc, _ := e.bf16Pair(e.randn(nslots*maxLen*kvw, 1))
		cvc, gvc, vr := e.bf16Pair(e.randn(nslots*maxLen*kvw, 1))
		for _, S := range []int{0, 2, 3, 5} {
			decodeForceSplits = S
			name := fmt.Sprintf("%d/%d heads, HS %d, splits %d", NH, KVH, HS, S)
			q := e.randn(T*W, 1)
			cq, gq, qr := e.bf16Pair(q)
			co, gout := e.bf16Zeros(T * NH * HS)
			if !e.gpu.tcDecode(planCached(slots, pos0, lens, maxLen, T), slots, nslots, true, gq.ptr, gkc.ptr, gvc.ptr, NH, KVH, HS) {
				t.Fatalf("%s: the step does not take the tensor-core kernel", name)
			}
			e.cpu.AttentionCached(co, cq, nil, ckc, cvc, slots, pos0, lens, maxLen, NH, KVH, HS, 0)
			e.gpu.AttentionCached(gout, gq, nil, gkc, gvc, slots, pos0, lens, maxLen, NH, KVH, HS, 0)
			vmax := math.Max(maxAbs(vr), maxAbs(qr)) // the new values are in qkv
			e.checkDecodeOut(name+": out", co, gout, vmax)
			e.checkRounded(name+": key cache", ckc, gkc)
			e.checkRounded(name+": value cache", cvc, gvc)
		}
		for _, b := range []model.Buffer{ckc, cvc} {
			e.cpu.Free(b)
		}
		for _, b := range []Buffer{gkc, gvc} {
			e.gpu.Free(b)
		}
	}
}

// TestDecodeSplits checks the split plan: none while the blocks fill the
// GPU twice, else enough to, within the cache length and decMaxSplits.
func TestDecodeSplits(t *testing.T) {
	for _, c := range []struct{ sms, rows, KVH, maxLen, want int }{
		{132, 256, 2, 2082, 1},   // batch 256 of Qwen2.5: 512 blocks
		{132, 132, 2, 4096, 1},   // exactly twice the SMs
		{132, 64, 2, 4096, 3},    // 128 blocks: 3 splits make 384
		{132, 1, 2, 4096, 16},    // batch 1: 256-key splits
		{132, 1, 2, 300, 2},      // a short cache
		{132, 1, 2, 100, 1},      // shorter than one split
		{132, 8, 2, 2048, 8},     // 16 blocks: 17 wanted, 8 fit 2048 keys
		{2, 5, 1, 136, 1},        // the emulator's two SMs
		{2, 1, 1, 1000, 4},       // 1 block: 4 make twice two SMs
		{132, 1000, 8, 10, 1},    // many rows
		{132, 3, 1, 1 << 20, 32}, // a huge cache: capped at decMaxSplits
	} {
		if got := decodeSplits(c.sms, c.rows, c.KVH, c.maxLen); got != c.want {
			t.Errorf("decodeSplits(sms %d, rows %d, KVH %d, maxLen %d) = %d, want %d", c.sms, c.rows, c.KVH, c.maxLen, got, c.want)
		}
	}
}

// roundBF16 rounds the values of a CPU buffer to bf16 in place: the CPU
// reference of an op whose GPU output is stored in bf16.
func (e *opEnv) roundBF16(b model.Buffer) {
	x := download(e.cpu, b)
	for i, v := range x {
		x[i] = bf16.Round(v)
	}
	e.cpu.Upload(b, x)
}

// TestGPUDecodeTCRoPE runs AttentionCached with a rope theta, the step's
// bias, rotation and cached attention in one call, against the CPU's AddBias, RoPE and
// AttentionCached with each bf16 store of the GPU's separate ops (the
// biased and the rotated qkv) rounded on the host: a prefill of two slots
// (the ops in turn), then two decode steps of three slots (one kernel;
// the second with 3 splits), with a float32 and a bf16 bias, for head
// sizes 64 and 128. The rotated keys in the cache may differ from the
// CPU's by the last bit of the double rotation before their rounding, so
// they are held to one bf16 rounding; the outputs as checkDecodeOut says
// (decode) or checkBF16Out with the float32 attention's tolerance
// (prefill).
func TestGPUDecodeTCRoPE(t *testing.T) {
	e := newOpEnv(t)
	defer func(s int) { decodeForceSplits = s }(decodeForceSplits)
	const nslots, maxLen, theta = 3, 80, 1e6
	steps := []struct {
		slots, pos0, lens []int32
		splits            int
	}{
		{[]int32{2, 0}, []int32{0, 0}, []int32{70, 5}, 0},
		{[]int32{0, 2, 1}, []int32{5, 70, 0}, []int32{1, 1, 1}, 0},
		{[]int32{2, 0, 1}, []int32{71, 6, 1}, []int32{1, 1, 1}, 3},
	}
	for _, sh := range []struct{ NH, KVH, HS int }{{14, 2, 64}, {12, 2, 128}} {
		NH, KVH, HS := sh.NH, sh.KVH, sh.HS
		W, kvw := (NH+2*KVH)*HS, KVH*HS
		for _, bbf := range []bool{false, true} {
			ckc, gkc := e.bf16Zeros(nslots * maxLen * kvw)
			cvc, gvc := e.bf16Zeros(nslots * maxLen * kvw)
			bias := e.randn(W, 0.5)
			cb, gb := e.pair(bias)
			if bbf {
				cb, gb, _ = e.bf16Pair(bias)
			}
			for s, st := range steps {
				decodeForceSplits = st.splits
				name := fmt.Sprintf("%d/%d heads, HS %d, bf16 bias %v, step %d", NH, KVH, HS, bbf, s)
				var pos []int32
				for j, n := range st.lens {
					for i := int32(0); i < n; i++ {
						pos = append(pos, st.pos0[j]+i)
					}
				}
				T := len(pos)
				cq, gq, qr := e.bf16Pair(e.randn(T*W, 1))
				co, gout := e.bf16Zeros(T * NH * HS)
				e.cpu.AddBias(cq, W, cb, T, W)
				e.roundBF16(cq)
				e.cpu.RoPE(cq, W, 0, pos, NH, HS, theta)
				e.cpu.RoPE(cq, W, NH*HS, pos, KVH, HS, theta)
				e.roundBF16(cq)
				e.cpu.AttentionCached(co, cq, nil, ckc, cvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, 0)
				e.gpu.AttentionCached(gout, gq, gb, gkc, gvc, st.slots, st.pos0, st.lens, maxLen, NH, KVH, HS, theta)
				if st.lens[0] == 1 {
					vmax := math.Max(maxAbs(download(e.cpu, cvc)), maxAbs(qr)+maxAbs(bias))
					e.checkDecodeOut(name+": out", co, gout, vmax)
				} else {
					e.checkBF16Out(name+": out", co, gout, 4*math.Sqrt(float64(HS+maxLen))*math.Ldexp(1, -24)+2e-6)
				}
				e.checkBF16Out(name+": key cache", ckc, gkc, 0)
				e.checkRounded(name+": value cache", cvc, gvc)
			}
			for _, b := range []model.Buffer{ckc, cvc, cb, gkc, gvc, gb} {
				if _, ok := b.(Buffer); ok {
					e.gpu.Free(b)
				} else {
					e.cpu.Free(b)
				}
			}
		}
	}
}
