package cuda

import (
	"fmt"
	"math"

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
// decode step (every chunk one token) with the decode kernel, which reads
// the cache once per key-value head; anything else with the tiled kernel
// of Attention, whose query rows of a chunk share each key read.
func (d *Device) AttentionCached(out, qkv, kc, vc model.Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int) {
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
	write, decode, forward := kKVCacheWrite, kAttentionDecode, kAttentionForward
	if kc.(Buffer).dtype != vc.(Buffer).dtype {
		panic(fmt.Sprintf("cuda: AttentionCached keys in %s, values in %s", kc.(Buffer).dtype, vc.(Buffer).dtype))
	}
	switch kvbf := kc.(Buffer).dtype == BF16; {
	case qbf && kvbf:
		write, decode, forward = kKVCacheWriteQBF16, kAttentionDecodeBF16, kAttentionForwardBF16
	case qbf:
		panic("cuda: AttentionCached of a bf16 qkv against a float32 KV cache; a bf16 step keeps its cache in bf16 (AllocCompute)")
	case kvbf:
		write, decode, forward = kKVCacheWriteBF16, kAttentionDecodeKVBF16, kAttentionForwardKVBF16
	}
	scale := float32(1 / math.Sqrt(float64(HS)))
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
