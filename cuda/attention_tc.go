package cuda

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
)

// The tensor-core attention of kernels/attention_tc.cu (forward) and
// attention_tc_bwd.cu (backward): bf16 q|k|v and
// output (mixed precision's storage), head sizes 64 and 128, GPUs of
// compute capability 8.0 and up. Everything else runs attention.cu's
// CUDA-core kernels.

// tcForward is one compiled shape of the tensor-core forward: rows query
// rows a block (16 per warp per row tile), keys per shared-memory tile.
type tcForward struct {
	k          kernelID
	rows, keys int
}

const tcThreads = 128 // 4 warps, the kernels' __launch_bounds__

var (
	// The forward's shapes by head size and name; "" is the default, the
	// fastest on an H200 (benchmarks/cuda.md): 64 rows and 128-key tiles
	// at head size 64 (164 TFLOP/s on a 4K row, against 146 with 64-key
	// tiles and 120 with 128-row blocks, whose two row tiles a warp share
	// every K and V fragment but take 213 registers), 64 and 64 at 128
	// (167, against 114 with 128-key tiles: 80 KB more shared memory).
	tcForwards = map[int]map[string]tcForward{
		64: {
			"":    {kernel("attention_tc.cu", "attention_tc_fwd64_n128", tcThreads), 64, 128},
			"n64": {kernel("attention_tc.cu", "attention_tc_fwd64", tcThreads), 64, 64},
			"m2":  {kernel("attention_tc.cu", "attention_tc_fwd64_m2", tcThreads), 128, 64},
		},
		128: {
			"":     {kernel("attention_tc.cu", "attention_tc_fwd128", tcThreads), 64, 64},
			"n128": {kernel("attention_tc.cu", "attention_tc_fwd128_n128", tcThreads), 64, 128},
		},
	}
	kAttentionTCBwdPre = kernel("attention_tc_bwd.cu", "attention_tc_bwd_pre", tcThreads)
	// The atomic backward's shapes by head size and name: 64 keys a block
	// (4 warps), or 128 (8 warps: each query tile loaded and each dQ
	// reduction made serves twice the keys).
	tcBackwards = map[int]map[string]tcBackward{
		64: {
			"":     {kernel("attention_tc_bwd.cu", "attention_tc_bwd64", tcThreads), 64},
			"k128": {kernel("attention_tc_bwd.cu", "attention_tc_bwd64_k128", 2*tcThreads), 128},
		},
		128: {
			"":     {kernel("attention_tc_bwd.cu", "attention_tc_bwd128", tcThreads), 64},
			"k128": {kernel("attention_tc_bwd.cu", "attention_tc_bwd128_k128", 2*tcThreads), 128},
		},
	}
	kAttentionTCBwdDet = map[int]kernelID{64: kernel("attention_tc_bwd.cu", "attention_tc_bwd64_det", tcThreads), 128: kernel("attention_tc_bwd.cu", "attention_tc_bwd128_det", tcThreads)}
	kAttentionTCDQ     = map[int]kernelID{64: kernel("attention_tc_bwd.cu", "attention_tc_dq64", tcThreads), 128: kernel("attention_tc_bwd.cu", "attention_tc_dq128", tcThreads)}
	kAttentionTCDKVSum = kernel("attention_tc_bwd.cu", "attention_tc_dkv_sum", 256)
)

// tcBlock is the backward's query tile, the deterministic backward's key
// tile and the dQ kernel's query tile.
const tcBlock = 64

// tcBackward is one compiled shape of the atomic backward: keys a block,
// 16 per warp.
type tcBackward struct {
	k    kernelID
	keys int
}

// attnEnv holds the environment's say over the attention kernels, read
// once: R1GO_ATTENTION=cuda-core keeps the CUDA-core kernels everywhere
// (for comparison), R1GO_ATTENTION_FORWARD names a forward shape of
// tcForwards (for tuning on a GPU), R1GO_CUDA_DETERMINISTIC=1 gives every
// Device the deterministic backward.
var attnEnv = sync.OnceValue(func() (env struct {
	coreOnly, deterministic bool
	forward                 string
}) {
	env.coreOnly = os.Getenv("R1GO_ATTENTION") == "cuda-core"
	env.forward = os.Getenv("R1GO_ATTENTION_FORWARD")
	env.deterministic = os.Getenv("R1GO_CUDA_DETERMINISTIC") == "1"
	return env
})

// SetDeterministic chooses the tensor-core backward without atomic
// additions (dK and dV summed over a group in a fixed order, dQ written
// once by its own kernel, about 1.4 times the products): two runs of the
// same step then give the same bits. The default adds dQ, dK and dV with
// atomic reductions, whose order varies between runs. The CUDA-core
// kernels are deterministic either way.
func (d *Device) SetDeterministic(on bool) {
	defer d.enter()()
	d.deterministic = on
}

// tensorCores says whether the attention of this layout and storage runs
// on the tensor cores: bf16 storage, a head size the kernels are built
// for, sm_80 or newer, and 16-byte aligned rows (cp.async and ldmatrix
// move 16 bytes).
func (d *Device) tensorCores(a attnLayout, bf bool, px uintptr) bool {
	if !bf || attnEnv().coreOnly || d.major < 8 || px%16 != 0 || (a.W*2)%16 != 0 {
		return false
	}
	_, ok := tcForwards[a.HS]
	return ok
}

// tcQueryTiles cuts packed sequences into blocks of up to rows query rows
// (first row, rows, first key row, keys the first row sees), heaviest
// first: a block's work grows with the keys its last row sees, and the
// longest blocks starting first keeps the last wave short.
func tcQueryTiles(seqs []int32, rows int) []int32 {
	var tl [][4]int32
	for s := 0; s+1 < len(seqs); s++ {
		s0, e := seqs[s], seqs[s+1]
		for t0 := s0; t0 < e; t0 += int32(rows) {
			tl = append(tl, [4]int32{t0, min(int32(rows), e-t0), s0, t0 - s0 + 1})
		}
	}
	slices.SortStableFunc(tl, func(a, b [4]int32) int { return cmp.Compare(b[3]+b[1], a[3]+a[1]) })
	return flatTiles(tl)
}

// tcKeyTiles cuts packed sequences into blocks of up to keys key rows
// (first key row, rows, end of the sequence, its start), heaviest first
// (the queries after the block's first key).
func tcKeyTiles(seqs []int32, keys int) []int32 {
	var tl [][4]int32
	for s := 0; s+1 < len(seqs); s++ {
		s0, e := seqs[s], seqs[s+1]
		for t0 := s0; t0 < e; t0 += int32(keys) {
			tl = append(tl, [4]int32{t0, min(int32(keys), e-t0), e, s0})
		}
	}
	slices.SortStableFunc(tl, func(a, b [4]int32) int { return cmp.Compare(b[2]-b[0], a[2]-a[0]) })
	return flatTiles(tl)
}

func flatTiles(tl [][4]int32) []int32 {
	out := make([]int32, 0, 4*len(tl))
	for _, t := range tl {
		out = append(out, t[:]...)
	}
	return out
}

// tcForwardShape returns the forward shape for head size hs: the one
// SetAttentionForward or the environment names, else the default.
func (d *Device) tcForwardShape(hs int) tcForward {
	shapes := tcForwards[hs]
	for _, name := range []string{d.attnForward, attnEnv().forward} {
		if f, ok := shapes[name]; ok {
			return f
		}
	}
	return shapes[""]
}

// tcBackwardShape returns the atomic backward's shape for head size hs:
// the one SetAttentionBackward names, else the default.
func (d *Device) tcBackwardShape(hs int) tcBackward {
	if b, ok := tcBackwards[hs][d.attnBackward]; ok {
		return b
	}
	return tcBackwards[hs][""]
}

// AttentionBackwardShapes lists the atomic tensor-core backward's shapes
// for head size hs ("" is the default).
func AttentionBackwardShapes(hs int) []string {
	return slices.Sorted(maps.Keys(tcBackwards[hs]))
}

// SetAttentionBackward makes the atomic tensor-core backward use the shape
// of that name ("" restores the default); the benchmarks time each.
func (d *Device) SetAttentionBackward(shape string) {
	defer d.enter()()
	d.attnBackward = shape
}

// AttentionForwardShapes lists the tensor-core forward's tile shapes for
// head size hs ("" is the default; none when the head size has no
// tensor-core kernels).
func AttentionForwardShapes(hs int) []string {
	return slices.Sorted(maps.Keys(tcForwards[hs]))
}

// SetAttentionForward makes the tensor-core forward use the tile shape of
// that name for the head sizes that have one ("" restores the default);
// the benchmarks time each shape with it.
func (d *Device) SetAttentionForward(shape string) {
	defer d.enter()()
	d.attnForward = shape
}

// Shared memory of the tensor-core kernels, in bytes: bf16 tiles of HS
// columns, plus the backward's dSᵀ tile and its queries' lse and D.
func tcForwardSmem(f tcForward, HS int) int { return 2 * HS * (f.rows + 4*f.keys) }
func tcBackwardSmem(HS, keys int) int {
	return 2*(2*keys*HS+4*tcBlock*HS+keys*tcBlock) + 4*4*tcBlock
}
func tcDQSmem(HS int) int { return 2 * 6 * tcBlock * HS }

func (d *Device) attentionTC(f tcForward, po, pl, px uintptr, a attnLayout, seqs []int32, T int, scale float32) {
	tiles := tcQueryTiles(seqs, f.rows)
	pt := d.ints(fmt.Sprintf("attn-tc-query-tiles-%d", f.rows), tiles)
	d.launch(f.k, dim3{len(tiles) / 4, a.NH, 1}, grid1(tcThreads), tcForwardSmem(f, a.HS),
		argPtr(po), argPtr(pl), argPtr(px), argPtr(px+uintptr(2*a.kOff)), argPtr(px+uintptr(2*a.vOff)), argPtr(pt),
		argInt(a.W), argInt(a.W), argInt(a.NH*a.HS), argInt(T), argInt(a.NH), argInt(a.KVH), argFloat(scale))
}

// attentionBackwardTC runs the backward on the tensor cores: the row sums
// D and dO in bf16 first, then the atomic kernel, or the deterministic
// kernels (per-head dK and dV shares summed in order, dQ on its own).
func (d *Device) attentionBackwardTC(pdx, pdy, po, pl, px uintptr, a attnLayout, seqs []int32, T int, scale float32) {
	NH, KVH, HS := a.NH, a.KVH, a.HS
	D := d.scratchBuf("attn-D", NH*T, F32)
	dob := d.scratchBuf("attn-dob", T*NH*HS, BF16)
	det := d.deterministic || attnEnv().deterministic
	d.launch(kAttentionTCBwdPre, grid1(T), grid1(tcThreads), 0, argPtr(D.ptr), argPtr(dob.ptr), argPtr(pdx), argPtr(pdy), argPtr(po),
		argInt(T), argInt(NH), argInt(HS), argInt(a.W), argInt(boolInt(!det)))
	pk, pv := px+uintptr(2*a.kOff), px+uintptr(2*a.vOff)
	if !det {
		b := d.tcBackwardShape(HS)
		kt := tcKeyTiles(seqs, b.keys)
		d.launch(b.k, dim3{len(kt) / 4, NH, 1}, grid1(b.k.maxThreads), tcBackwardSmem(HS, b.keys),
			argPtr(pdx), argPtr(0), argPtr(px), argPtr(pk), argPtr(pv), argPtr(dob.ptr), argPtr(pl), argPtr(D.ptr),
			argPtr(d.ints(fmt.Sprintf("attn-tc-key-tiles-%d", b.keys), kt)),
			argInt(a.W), argInt(T), argInt(NH), argInt(KVH), argFloat(scale), argInt(boolInt(pdx%8 == 0)))
		return
	}
	kt := tcKeyTiles(seqs, tcBlock)
	pkt := d.ints("attn-tc-key-tiles-64", kt)
	part := d.scratchBuf("attn-dkv-part", 2*NH*T*HS, F32)
	d.launch(kAttentionTCBwdDet[HS], dim3{len(kt) / 4, NH, 1}, grid1(tcThreads), tcBackwardSmem(HS, tcBlock),
		argPtr(pdx), argPtr(part.ptr), argPtr(px), argPtr(pk), argPtr(pv), argPtr(dob.ptr), argPtr(pl), argPtr(D.ptr), argPtr(pkt),
		argInt(a.W), argInt(T), argInt(NH), argInt(KVH), argFloat(scale), argInt(1))
	d.launch(kAttentionTCDKVSum, d.elementwiseGrid(T*KVH*HS), grid1(256), 0, argPtr(pdx), argPtr(part.ptr),
		argInt(T), argInt(NH), argInt(KVH), argInt(HS), argInt(a.W))
	qt := tcQueryTiles(seqs, tcBlock)
	d.launch(kAttentionTCDQ[HS], dim3{len(qt) / 4, NH, 1}, grid1(tcThreads), tcDQSmem(HS),
		argPtr(pdx), argPtr(px), argPtr(pk), argPtr(pv), argPtr(dob.ptr), argPtr(pl), argPtr(D.ptr),
		argPtr(d.ints("attn-tc-query-tiles-64", qt)), argInt(a.W), argInt(T), argInt(NH), argInt(KVH), argFloat(scale))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
