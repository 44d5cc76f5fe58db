package cuda

import (
	"fmt"
	"math"
	"os"

	"github.com/r1go/r1go/model"
)

var (
	kKVCacheWrite    = kernel("attention_cached.cu", "kv_cache_write", 256)
	kAttentionDecode = kernel("attention_cached.cu", "attention_decode", 512)

	// The same over a KV cache stored in bf16 (AllocCompute under mixed
	// precision): keys and values are rounded once as they are written and
	// widened exactly as they are read; scores, softmax and the output
	// accumulate in float32.
	kKVCacheWriteBF16       = kernel("attention_cached.cu", "kv_cache_write_bf16", 256)
	kAttentionDecodeKVBF16  = kernel("attention_cached.cu", "attention_decode_kvbf16", 512)
	kAttentionForwardKVBF16 = kernel("attention.cu", "attention_forward_kvbf16", 256)

	// qkv and out in bf16 too (a step's activations under mixed
	// precision): keys and values copied exactly into the bf16 cache.
	kKVCacheWriteQBF16   = kernel("attention_cached.cu", "kv_cache_write_qbf16", 256)
	kAttentionDecodeBF16 = kernel("attention_cached.cu", "attention_decode_bf16", 512)

	// The same step on tensor cores (sm_80 on, head sizes 64 and 128),
	// writing the new keys and values itself.
	kAttentionDecodeTC64  = kernel("attention_decode_tc.cu", "attention_decode_tc64", decThreads)
	kAttentionDecodeTC128 = kernel("attention_decode_tc.cu", "attention_decode_tc128", decThreads)
)

// decodeMaxGroup is the most query heads per key-value head the decode
// kernel serves (one warp each, 512 threads).
const decodeMaxGroup = 16

// cachePlan is the host-side geometry of one AttentionCached call: the
// cache row each packed row's key and value go to, and the query tiles of
// attention_forward with the cache as keys.
type cachePlan struct {
	dst    []int32 // [T] slot·maxLen + position
	tiles  []int32 // int4 per tile: first row, rows, slot·maxLen, keys of the first row
	rows   []int32 // int2 per row: slot·maxLen, keys the row sees (the decode kernel)
	decode bool    // every chunk is one token: a decode step
}

// attnDecodeSmem is the shared memory of attention_decode, in bytes.
func attnDecodeSmem(HS, group int) int { return 4 * (2*attnKeys*(HS+1) + group*HS) }

func planCached(slots, pos0, lens []int32, maxLen, T int) cachePlan {
	if len(slots) != len(lens) || len(pos0) != len(lens) {
		panic(fmt.Sprintf("cuda: AttentionCached with %d slots, %d positions, %d lengths", len(slots), len(pos0), len(lens)))
	}
	pl := cachePlan{decode: true}
	row := int32(0)
	for j, n := range lens {
		pl.decode = pl.decode && n == 1
		if n < 0 || pos0[j] < 0 || int(pos0[j]+n) > maxLen {
			panic(fmt.Sprintf("cuda: chunk %d reaches position %d past the KV cache length %d", j, pos0[j]+n, maxLen))
		}
		base := slots[j] * int32(maxLen)
		for i := int32(0); i < n; i++ {
			pl.dst = append(pl.dst, base+pos0[j]+i)
			pl.rows = append(pl.rows, base, pos0[j]+i+1)
		}
		for i0 := int32(0); i0 < n; i0 += attnRows {
			pl.tiles = append(pl.tiles, row+i0, min(attnRows, n-i0), base, pos0[j]+i0+1)
		}
		row += n
	}
	if int(row) != T {
		panic(fmt.Sprintf("cuda: AttentionCached chunks hold %d rows, qkv has %d", row, T))
	}
	return pl
}

// AttentionCached writes each chunk's keys and values into its cache slot,
// then runs its queries against the slot's positions [0, pos0+len): a
// decode step (every chunk one token) with a decode kernel, which reads
// the cache once per key-value head (on tensor cores for a bf16 step,
// attention_decode_tc.cu, which also writes the new keys itself);
// anything else with the tiled kernel of Attention, whose query rows of a
// chunk share each key read.
//
// With theta > 0 it first adds bias (nil: none) to qkv and rotates qkv's
// NH query and KVH key heads at each row's position (pos0[j]+i). A decode
// step on the tensor-core path does all of it in the attention kernel,
// one launch instead of five, and leaves qkv as it was; anything else
// runs AddBias and RoPE in turn.
func (d *Device) AttentionCached(out, qkv, bias, kc, vc model.Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int, theta float64) {
	if bias != nil && !(theta > 0) {
		panic(fmt.Sprintf("cuda: AttentionCached with a bias and rope theta %g: the bias comes with the rotation", theta))
	}
	a := newAttnLayout(NH, KVH, HS)
	T := qkv.Len() / a.W
	kvw := KVH * HS
	for _, s := range slots {
		if s < 0 || int(s+1)*maxLen*kvw > kc.Len() {
			panic(fmt.Sprintf("cuda: KV cache slot %d outside a cache of %d values", s, kc.Len()))
		}
	}
	pl := planCached(slots, pos0, lens, maxLen, T)
	px, po, qbf, es := attnStorage(qkv, out, T*a.W, T*NH*HS, "AttentionCached")
	pk, pv := cacheBuf(kc, -1, "AttentionCached kc"), cacheBuf(vc, kc.Len(), "AttentionCached vc")
	if kc.(Buffer).dtype != vc.(Buffer).dtype {
		panic(fmt.Sprintf("cuda: AttentionCached keys in %s, values in %s", kc.(Buffer).dtype, vc.(Buffer).dtype))
	}
	kvbf := kc.(Buffer).dtype == BF16
	var pb uintptr
	var bbf bool
	if bias != nil {
		pb, bbf, _ = weightArg(bias, a.W, "AttentionCached bias")
	}
	scale := float32(1 / math.Sqrt(float64(HS)))
	if d.tcDecode(pl, slots, kc.Len()/(maxLen*kvw), qbf && kvbf, px, pk, pv, NH, KVH, HS) {
		defer d.enter()()
		var freq uintptr
		if theta > 0 {
			freq = d.ropeFreqs(theta, HS).ptr
		}
		d.attentionDecodeTC(po, px, pk, pv, pl.rows, pb, bbf, freq, T, maxLen, a, scale)
		return
	}
	if theta > 0 {
		pos := make([]int32, 0, T)
		for j, n := range lens {
			for i := int32(0); i < n; i++ {
				pos = append(pos, pos0[j]+i)
			}
		}
		if bias != nil {
			d.AddBias(qkv, a.W, bias, T, a.W)
		}
		d.RoPE(qkv, a.W, 0, pos, NH, HS, theta)
		d.RoPE(qkv, a.W, a.kOff, pos, KVH, HS, theta)
	}
	write, decode, forward := kKVCacheWrite, kAttentionDecode, kAttentionForward
	switch {
	case qbf && kvbf:
		write, decode, forward = kKVCacheWriteQBF16, kAttentionDecodeBF16, kAttentionForwardBF16
	case qbf:
		panic("cuda: AttentionCached of a bf16 qkv against a float32 KV cache; a bf16 step keeps its cache in bf16 (AllocCompute)")
	case kvbf:
		write, decode, forward = kKVCacheWriteBF16, kAttentionDecodeKVBF16, kAttentionForwardKVBF16
	}
	defer d.enter()()
	d.launch(write, d.elementwiseGrid(T*kvw), grid1(256), 0,
		argPtr(pk), argPtr(pv), argPtr(px+uintptr(es*a.kOff)), argPtr(px+uintptr(es*a.vOff)), argPtr(d.ints("cache-rows", pl.dst)), argInt(T), argInt(a.W), argInt(kvw))
	if group := NH / KVH; pl.decode && group <= decodeMaxGroup {
		d.launch(decode, dim3{T, KVH, 1}, grid1(32*group), attnDecodeSmem(HS, group),
			argPtr(po), argPtr(px), argPtr(pk), argPtr(pv), argPtr(d.ints("cache-decode-rows", pl.rows)), argInt(a.W), argInt(kvw), argInt(NH*HS), argInt(NH), argInt(KVH), argInt(HS), argFloat(scale))
		return
	}
	d.launch(forward, dim3{len(pl.tiles) / 4, NH, 1}, grid1(32*attnRows), attnForwardSmem(HS),
		argPtr(po), argPtr(0), argPtr(px), argPtr(pk), argPtr(pv), argPtr(d.ints("cache-tiles", pl.tiles)),
		argInt(a.W), argInt(kvw), argInt(NH*HS), argInt(T), argInt(NH), argInt(KVH), argInt(HS), argFloat(scale))
}

// cacheBuf unwraps a KV cache buffer: float32, or bf16 from AllocCompute
// under mixed precision. It checks the length when want ≥ 0.
func cacheBuf(b model.Buffer, want int, what string) uintptr {
	p, _, _ := weightArg(b, want, what) // the same two storages as a weight
	return p
}

// Geometry of attention_decode_tc.cu and its split plan.
const (
	decThreads = 128 // 4 warps
	decKeys    = 64  // keys per shared-memory tile
	decStages  = 3   // tiles in flight
	decM       = 16  // mma rows: the group's query heads, padded
	// decSplitKeys is the fewest cache positions per split the planner
	// counts on: a split shorter than that costs more in its partial
	// output and the combine than its share of the read saves (on an
	// H200 a batch-1 layer at 144 keys took 7.8 µs unsplit, 10.8 µs in
	// two splits).
	decSplitKeys = 256
	// decMaxSplits bounds the splits of one (row, key-value head): the
	// last block to arrive reads every split's partial output.
	decMaxSplits = 32
)

// decodeTCOn lets decode steps take the tensor-core kernel;
// R1GO_CUDA_DECODE_TC=0 keeps the CUDA-core one (an A/B measurement).
var decodeTCOn = os.Getenv("R1GO_CUDA_DECODE_TC") != "0"

// decodeForceSplits, when positive, replaces the planned split count
// (tests reach splits the emulator's two SMs never plan).
var decodeForceSplits int

// decodeTCSmem is the shared memory of attention_decode_tc, in bytes: K
// and V stages, the query tile, the staged q heads, key and value (bf16),
// the rotation's HS/2 cos, sin pairs in double, and the merge's statistics
// (2·HS + 200 floats: the new key and value, scores, per-warp and per-head
// maxima and sums, the combine's flag).
func decodeTCSmem(HS int) int {
	return 2*decStages*decKeys*HS*2 + decM*HS*2 + (decM+2)*HS*2 + 8*HS + 4*(2*HS+200)
}

// decodeSplits plans how many key ranges each (row, key-value head) of a
// decode step is cut into: none while rows·KVH blocks fill the GPU twice
// over (batch 256 of Qwen2.5), else enough to, but no more than the
// longest context a slot can hold (maxLen) cut into decSplitKeys-long
// ranges, and at most decMaxSplits. It depends on maxLen rather than on
// this step's contexts, so a recorded step graph (stepgraph.go) stays
// right as the contexts grow: the kernel cuts each row's own keys evenly.
func decodeSplits(sms, rows, KVH, maxLen int) int {
	blocks := rows * KVH
	if blocks >= 2*sms {
		return 1
	}
	return max(1, min(ceilDiv(2*sms, blocks), ceilDiv(maxLen, decSplitKeys), decMaxSplits))
}

// tcDecode says whether a step takes attention_decode_tc: a decode step
// (every chunk one token), q, out and the cache in bf16 (bf16), head size
// 64 or 128, at most 16 query heads a key-value head, sm_80 or
// later, 16-byte aligned cache and qkv rows (cp.async), and every row in
// a slot of its own (a block writes its row's key without seeing the
// other rows' writes). nslots is the cache's slot count.
func (d *Device) tcDecode(pl cachePlan, slots []int32, nslots int, bf16 bool, px, pk, pv uintptr, NH, KVH, HS int) bool {
	if !decodeTCOn || !pl.decode || !bf16 || d.major < 8 || HS != 64 && HS != 128 || NH/KVH > decM ||
		px%16 != 0 || pk%16 != 0 || pv%16 != 0 {
		return false
	}
	seen := make([]uint64, (nslots+63)/64)
	for _, s := range slots {
		if seen[s/64]&(1<<(s%64)) != 0 {
			return false
		}
		seen[s/64] |= 1 << (s % 64)
	}
	return true
}

// attentionDecodeTC launches attention_decode_tc over T decode rows (rows:
// an int2 per row, first cache row of its slot and keys it sees, the new
// one included), with the q/k/v bias (pb, bf16 when bbf; 0 for none) and
// the RoPE frequencies (freq; 0 when qkv is already rotated). Split
// launches keep their partial outputs and arrival counters in scratch.
func (d *Device) attentionDecodeTC(po, px, pk, pv uintptr, rows []int32, pb uintptr, bbf bool, freq uintptr, T, maxLen int, a attnLayout, scale float32) {
	k := kAttentionDecodeTC64
	if a.HS == 128 {
		k = kAttentionDecodeTC128
	}
	G, kvw := a.NH/a.KVH, a.KVH*a.HS
	S := decodeSplits(d.sms, T, a.KVH, maxLen)
	if decodeForceSplits > 0 {
		S = decodeForceSplits
	}
	var part, lse, count uintptr
	if S > 1 {
		part = d.scratchBuf("decode-part", T*a.KVH*S*G*a.HS, F32).ptr
		lse = d.scratchBuf("decode-lse", T*a.KVH*S*G, F32).ptr
		gen := d.scratchGen
		count = d.scratchBuf("decode-count", T*a.KVH, I32).ptr
		if d.scratchGen != gen { // a new buffer; the kernel leaves the counts zero
			d.memset(count, 0, T*a.KVH)
		}
	}
	b := 0
	if bbf {
		b = 1
	}
	d.launch(k, dim3{T, a.KVH, S}, grid1(decThreads), decodeTCSmem(a.HS),
		argPtr(po), argPtr(part), argPtr(lse), argPtr(count), argPtr(px), argPtr(pk), argPtr(pv),
		argPtr(d.ints("cache-decode-rows", rows)), argPtr(pb), argInt(b), argPtr(freq),
		argInt(a.W), argInt(kvw), argInt(a.NH*a.HS), argInt(a.NH), argInt(a.KVH), argFloat(scale))
}
