package cuda

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/model"
)

var (
	kAttentionForward     = kernel("attention.cu", "attention_forward", 256)
	kAttentionBackwardDQ  = kernel("attention.cu", "attention_backward_dq", 256)
	kAttentionBackwardDKV = kernel("attention.cu", "attention_backward_dkv", 256)

	// qkv and the output stored in bf16 under mixed precision: read
	// widened, the output rounded once; sums, softmax and gradients float32.
	kAttentionForwardBF16     = kernel("attention.cu", "attention_forward_bf16", 256)
	kAttentionBackwardDQBF16  = kernel("attention.cu", "attention_backward_dq_bf16", 256)
	kAttentionBackwardDKVBF16 = kernel("attention.cu", "attention_backward_dkv_bf16", 256)
)

// attnStorage unwraps qkv and out, which are both float32 or both bf16
// (mixed precision's per-layer storage), and returns the element size.
func attnStorage(qkv, out model.Buffer, nqkv, nout int, op string) (px, po uintptr, bf bool, es int) {
	px, bf, es = weightArg(qkv, nqkv, op+" qkv")
	po, obf, _ := weightArg(out, nout, op+" out")
	if bf != obf {
		panic(fmt.Sprintf("cuda: %s of a %s qkv with a %s out; both must have one type", op, qkv.(Buffer).dtype, out.(Buffer).dtype))
	}
	return px, po, bf, es
}

// Tile shape of attention.cu: attnRows query (or key) rows per block, one
// warp each; attnKeys keys (or queries) per shared-memory tile, one lane
// each; head sizes up to attnMaxHS.
const (
	attnRows  = 8
	attnKeys  = 32
	attnMaxHS = 256
)

// attnLayout is the packed qkv row: q | k | v, (NH + 2·KVH)·HS wide.
type attnLayout struct{ NH, KVH, HS, W, kOff, vOff int }

func newAttnLayout(NH, KVH, HS int) attnLayout {
	if NH <= 0 || KVH <= 0 || NH%KVH != 0 {
		panic(fmt.Sprintf("cuda: %d query heads are not a multiple of %d key-value heads", NH, KVH))
	}
	if HS <= 0 || HS > attnMaxHS {
		panic(fmt.Sprintf("cuda: head size %d outside the kernels' range [1, %d]", HS, attnMaxHS))
	}
	return attnLayout{NH: NH, KVH: KVH, HS: HS, W: (NH + 2*KVH) * HS, kOff: NH * HS, vOff: (NH + KVH) * HS}
}

// queryTiles cuts packed sequences into blocks of up to attnRows query
// rows, each tile an int4 (first row, rows, first key row, keys the first
// row sees) as attention_forward reads it.
func queryTiles(seqs []int32) []int32 {
	var out []int32
	for s := 0; s+1 < len(seqs); s++ {
		s0, e := seqs[s], seqs[s+1]
		for t0 := s0; t0 < e; t0 += attnRows {
			out = append(out, t0, min(attnRows, e-t0), s0, t0-s0+1)
		}
	}
	return out
}

// keyTiles cuts packed sequences into blocks of up to attnRows key rows:
// (first key row, rows, end of the sequence, 0), as
// attention_backward_dkv reads them.
func keyTiles(seqs []int32) []int32 {
	var out []int32
	for s := 0; s+1 < len(seqs); s++ {
		s0, e := seqs[s], seqs[s+1]
		for t0 := s0; t0 < e; t0 += attnRows {
			out = append(out, t0, min(attnRows, e-t0), e, 0)
		}
	}
	return out
}

func checkSeqs(seqs []int32, T int) {
	if len(seqs) < 2 || seqs[0] != 0 || int(seqs[len(seqs)-1]) != T {
		panic(fmt.Sprintf("cuda: sequence offsets %v do not cover %d tokens", seqs, T))
	}
	for s := 1; s < len(seqs); s++ {
		if seqs[s] < seqs[s-1] {
			panic(fmt.Sprintf("cuda: sequence offsets %v decrease", seqs))
		}
	}
}

// Shared memory of each attention kernel, in bytes.
func attnForwardSmem(HS int) int { return 4 * (2*attnKeys*(HS+1) + attnRows*HS) }
func attnDQSmem(HS int) int      { return 4 * (2*attnKeys*(HS+1) + 2*attnRows*HS) }
func attnDKVSmem(HS int) int     { return 4 * (2*attnKeys*(HS+1) + 2*attnRows*HS + 2*attnKeys) }

// Attention is causal grouped-query attention over packed sequences. qkv
// and out are both float32 or both bf16 (mixed precision's storage); bf16
// of head size 64 or 128 runs on the tensor cores (attention_tc.go).
func (d *Device) Attention(out, lse, qkv model.Buffer, seqs []int32, NH, KVH, HS int) {
	a := newAttnLayout(NH, KVH, HS)
	T := qkv.Len() / a.W
	checkSeqs(seqs, T)
	px, po, bf, es := attnStorage(qkv, out, T*a.W, T*NH*HS, "Attention")
	pl := f32(lse, NH*T, "Attention lse")
	k := kAttentionForward
	if bf {
		k = kAttentionForwardBF16
	}
	tiles := queryTiles(seqs)
	scale := float32(1 / math.Sqrt(float64(HS)))
	defer d.enter()()
	if d.tensorCores(a, bf, px) {
		d.attentionTC(d.tcForwardShape(HS), po, pl, px, a, seqs, T, scale)
		return
	}
	pt := d.ints("attn-query-tiles", tiles)
	d.launch(k, dim3{len(tiles) / 4, NH, 1}, grid1(32*attnRows), attnForwardSmem(HS),
		argPtr(po), argPtr(pl), argPtr(px), argPtr(px+uintptr(es*a.kOff)), argPtr(px+uintptr(es*a.vOff)), argPtr(pt),
		argInt(a.W), argInt(a.W), argInt(NH*HS), argInt(T), argInt(NH), argInt(KVH), argInt(HS), argFloat(scale))
}

// AttentionBackward sets dqkv (every element) from dout: one kernel for
// dQ (which also stores D = rowsum(dO ⊙ O)), then one for dK and dV. qkv
// and out are float32 or bf16 as in the forward; the gradients float32.
func (d *Device) AttentionBackward(dqkv, dout, out, lse, qkv model.Buffer, seqs []int32, NH, KVH, HS int) {
	a := newAttnLayout(NH, KVH, HS)
	T := qkv.Len() / a.W
	checkSeqs(seqs, T)
	px, po, bf, es := attnStorage(qkv, out, T*a.W, T*NH*HS, "AttentionBackward")
	pdx, pdy := f32(dqkv, T*a.W, "AttentionBackward dqkv"), f32(dout, T*NH*HS, "AttentionBackward dout")
	pl := f32(lse, NH*T, "AttentionBackward lse")
	kdq, kdkv := kAttentionBackwardDQ, kAttentionBackwardDKV
	if bf {
		kdq, kdkv = kAttentionBackwardDQBF16, kAttentionBackwardDKVBF16
	}
	scale := float32(1 / math.Sqrt(float64(HS)))
	defer d.enter()()
	if d.tensorCores(a, bf, px) {
		d.attentionBackwardTC(pdx, pdy, po, pl, px, a, seqs, T, scale)
		return
	}
	qt, kt := queryTiles(seqs), keyTiles(seqs)
	D := d.scratchBuf("attn-D", NH*T, F32)
	pk, pv := px+uintptr(es*a.kOff), px+uintptr(es*a.vOff)
	d.launch(kdq, dim3{len(qt) / 4, NH, 1}, grid1(32*attnRows), attnDQSmem(HS),
		argPtr(pdx), argPtr(D.ptr), argPtr(pdy), argPtr(po), argPtr(pl), argPtr(px), argPtr(pk), argPtr(pv), argPtr(d.ints("attn-query-tiles", qt)),
		argInt(a.W), argInt(a.W), argInt(NH*HS), argInt(a.W), argInt(T), argInt(NH), argInt(KVH), argInt(HS), argFloat(scale))
	d.launch(kdkv, dim3{len(kt) / 4, KVH, 1}, grid1(32*attnRows), attnDKVSmem(HS),
		argPtr(pdx+uintptr(4*a.kOff)), argPtr(pdx+uintptr(4*a.vOff)), argPtr(pdy), argPtr(D.ptr), argPtr(pl), argPtr(px), argPtr(pk), argPtr(pv),
		argPtr(d.ints("attn-key-tiles", kt)), argInt(a.W), argInt(a.W), argInt(NH*HS), argInt(a.W), argInt(T), argInt(NH), argInt(KVH), argInt(HS), argFloat(scale))
}
