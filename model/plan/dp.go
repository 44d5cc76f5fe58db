package plan

import (
	"fmt"

	"github.com/r1go/r1go/optim"
)

// Data parallel. Every rank holds the whole model, so a plan is per rank.
// Stage 0 sums the gradients in place, bucket by bucket (no scratch of
// ours; the transport's own buffers are not counted). The ZeRO layout is
// the runtime's own, optim.ShardLayout: buckets of Ranks·B values (B =
// min(bucket, ⌈n/Ranks⌉)), each cut into Ranks equal chunks, rank r owning
// chunk r of each; rank 0 owns a whole chunk of every bucket, so it holds
// the most.
//
//   - ZeRO-1 shards the optimizer state: the AdamW moments and, under
//     mixed precision, the fp32 master weights, which are optimizer state
//     there (the device trains from the bf16 copy; DeepSpeed's ZeRO-1
//     shards them with the moments, and each rank all-gathers the bf16
//     copy after its step). In fp32 training (the CPU device) the weights
//     are the compute copy itself, and nothing of them is sharded.
//   - ZeRO-2 also shards the fp32 gradients: a rank keeps its summed
//     chunk of each bucket, and of the arena only what the backward is
//     writing and the buckets in flight (rl/dp/zero2.go gives the rest
//     back as soon as it is sent): zeroTwoTransient.
//
// Beside its shards a rank keeps receive scratch (one chunk at stage 1,
// one per bucket in flight at stage 2) and, when the last bucket does not
// divide by Ranks, the padded last bucket.

// ZeroInflight is how many gradient buckets a ZeRO-2 rank has in flight
// at once (optim.ShardsInFlight, which rl/dp/zero2.go sends with).
const ZeroInflight = optim.ShardsInFlight

// ZeroShard is what rank 0 of ranks holds of an arena of n values under
// ZeRO-1 with an all-reduce bucket of bucket values: own values of the
// moments, and scratch float32 values (a receive chunk and the padded last
// bucket, as rl/dp/zero.go allocates them), from the layout the runtime
// shards with (optim.ShardLayout).
func ZeroShard(n, bucket, ranks int) (own, scratch int64) {
	if ranks < 2 {
		return int64(n), 0
	}
	l := optim.NewShardLayout(n, bucket, ranks)
	_, o := l.Spans(0)
	return int64(o), int64(l.Bucket + l.Padded())
}

// ZeroTwoScratch is ZeroShard's scratch at stage 2: a receive chunk per
// bucket in flight, and the padded last bucket.
func ZeroTwoScratch(n, bucket, ranks int) int64 {
	_, sc := ZeroShard(n, bucket, ranks)
	return sc + (ZeroInflight-1)*int64(optim.NewShardLayout(n, bucket, ranks).Bucket)
}

// ZeroTwoTransient bounds, in float32 values, what a ZeRO-2 rank holds of
// a gradient arena of n values at once beside its shard: the largest run
// of gradients the backward writes between two sends (a decoder layer,
// seg; the LM head or the embedding table), the bucket that straddles its
// top, the buckets in flight, and one page (1024 values) per bucket edge
// that a bucket not starting on a page leaves zeroed but resident.
func ZeroTwoTransient(n int64, seg, bucket int64, ranks int) int64 {
	return ZeroTwoTransientPaged(n, seg, bucket, ranks, 1024)
}

// ZeroTwoTransientPaged is ZeroTwoTransient for memory given back in pages
// of page values: a bucket edge keeps a page, and the run being written is
// mapped in whole pages (one more at each end). The CUDA device's pages are
// its VMM chunks (CUDAChunk), and it gives a bucket's chunks back once its
// stream has passed them, so up to CUDAPending sent buckets still hold
// theirs. Buckets of whole pages (the default 25 MB bucket over 8 ranks is
// 100 chunks) have edges only at the arena's ends.
func ZeroTwoTransientPaged(n int64, seg, bucket int64, ranks int, page int64) int64 {
	b := max(1, min(bucket, (n+int64(ranks)-1)/int64(ranks)))
	B := int64(ranks) * b
	edges := (n+B-1)/B + 1
	if page > 1024 && B%page == 0 {
		edges = 2
	}
	extra := int64(0)
	if page > 1024 {
		extra = 2*page + CUDAPending*B
	}
	return min(n, seg+extra+(ZeroInflight+1)*B+edges*page)
}

// CUDAChunk is the CUDA device's VMM chunk in float32 values: the
// recommended allocation granularity of current GPUs, 2 MiB.
const CUDAChunk = 2 << 20 / 4

// CUDAPending is how many given-back spans (buckets) the CUDA device lets
// wait for its stream before it waits itself (cuda's vmmMaxPending).
const CUDAPending = 2

// layer is the number of values of one decoder layer.
func (sh shape) layer() int64 {
	return (sh.arena(false, false) - int64(sh.V)*int64(sh.C) - int64(sh.C)) / int64(max(sh.L, 1))
}

// segment is the largest run of gradients the backward writes between two
// of its callbacks: a layer, or the vocabulary table. A tied table is
// written by the LM head first and by the embedding last, so it is held
// the whole backward, beside each layer.
func (sh shape) segment(lmHead bool) int64 {
	VC := int64(sh.V) * int64(sh.C)
	if lmHead && sh.tied {
		return VC + sh.layer()
	}
	return max(sh.layer(), VC)
}

// bucketValues is the all-reduce bucket in float32 values (rl/dp DP.bucket).
func (s Settings) bucketValues() int {
	mb := s.BucketMB
	if mb <= 0 {
		mb = 25
	}
	return max(1, int(mb*(1<<20)/4))
}

// stage is the ZeRO stage in force: 0 in a run of one process.
func (s Settings) stage() int {
	if s.Ranks < 2 {
		return 0
	}
	if s.Zero1 && s.Zero < 1 {
		return 1
	}
	return min(max(s.Zero, 0), 2)
}

// zero1 says whether the optimizer state is sharded (stage 1 or 2).
func (s Settings) zero1() bool { return s.stage() >= 1 }

// moments is the bytes of an AdamW's two moments over an arena of n
// values at sb bytes each, and the ZeRO scratch, per rank; what says how.
func (s Settings) moments(n, sb int64) (state, scratch int64, what string) {
	if !s.zero1() {
		return 2 * n * sb, 0, ""
	}
	own, sc := ZeroShard(int(n), s.bucketValues(), s.Ranks)
	if s.stage() == 2 {
		sc = ZeroTwoScratch(int(n), s.bucketValues(), s.Ranks)
	}
	return 2 * own * sb, sc * 4, fmt.Sprintf(", ZeRO-%d shard: %d of %d values on rank 0 of %d", s.stage(), own, n, s.Ranks)
}

// pages says whether the device gives back the parts of its fp32 master
// weights a rank does not update under ZeRO: the CPU device needs not
// (its weights are fp32 compute weights, never sharded); the CUDA device
// does under dp.shard_masters (CUDAPaging), with VMM.
func (s Settings) pages() bool { return s.Device != "cuda" || s.CUDAPaging && !s.CUDANoVMM }

// keptMasters is what a rank keeps of the fp32 masters beside its shard
// when they are sharded on the CUDA device (rl/dp/masters.go): the 1-D
// tensors the device reads in fp32 (norm weights, biases), each run of
// them in whole chunks (one more at each end), and the bucket of scratch
// every bucket is gathered into.
func (s Settings) keptMasters(sh shape) (values int64, runs int) {
	C := int64(sh.C)
	perLayer := 2 * C
	runs = 2
	if sh.bias {
		perLayer += int64(sh.QKV)
		runs++
	}
	if sh.qkNorm {
		perLayer += 2 * int64(sh.HS)
		runs++
	}
	runs = runs*sh.L + 1
	return int64(sh.L)*perLayer + C + int64(runs)*2*CUDAChunk, runs
}

// gradPages says whether the device gives back the gradient buckets a
// ZeRO-2 rank has sent: the CPU device does (madvise), the CUDA device
// through its VMM arenas (cuda/vmm.go) unless it has none (CUDANoVMM).
func (s Settings) gradPages() bool { return s.Device != "cuda" || !s.CUDANoVMM || s.CUDAPaging }

// gradPage is the unit, in float32 values, in which gradients are given
// back: a host page, or a VMM chunk on the CUDA device.
func (s Settings) gradPage() int64 {
	if s.Device == "cuda" {
		return CUDAChunk
	}
	return 1024
}

// masters is the fp32 master weights of a mixed-precision policy of P
// values: the whole arena, or under ZeRO with dp.shard_masters rank 0's
// shard of it and, on the CUDA device, what keptMasters says.
func (s Settings) masters(sh shape, P int64) (int64, string) {
	if !s.zero1() {
		return P * 4, "the fp32 arena the optimizer updates"
	}
	own, _ := ZeroShard(int(P), s.bucketValues(), s.Ranks)
	if !s.pages() {
		why := "dp.shard_masters=true would keep only the shard"
		if s.CUDANoVMM {
			why = "this CUDA device has no virtual memory management to give the rest back"
		}
		return P * 4, fmt.Sprintf("the fp32 arena the optimizer updates, whole: ZeRO-%d updates a shard of %d values (%.2f GiB); %s",
			s.stage(), own, float64(own*4)/GiB, why)
	}
	if s.Device != "cuda" {
		return own * 4, fmt.Sprintf("fp32, optimizer state: ZeRO-%d shard of %d values on rank 0 of %d (the bf16 copy is all-gathered after the step)", s.stage(), own, s.Ranks)
	}
	kept, runs := s.keptMasters(sh)
	b := int64(s.Ranks) * int64(max(1, min(s.bucketValues(), (int(P)+s.Ranks-1)/s.Ranks)))
	return (own + kept + b) * 4, fmt.Sprintf("fp32, optimizer state: ZeRO-%d shard of %d values on rank 0 of %d, the norm weights and biases (%d runs, in whole 2 MiB chunks) and a bucket of %d values the bf16 copy is gathered through (dp.shard_masters; a checkpoint gathers them bucket by bucket onto rank 0's host)",
		s.stage(), own, s.Ranks, runs, b)
}

// grads is the fp32 gradients of an arena of n values: the whole arena,
// or under ZeRO-2 rank 0's shard and the arena's transient part.
func (s Settings) grads(sh shape, n int64, lmHead, valueHead bool) (int64, string) {
	if s.stage() < 2 {
		return n * 4, "fp32, one arena"
	}
	own, _ := ZeroShard(int(n), s.bucketValues(), s.Ranks)
	tr := ZeroTwoTransientPaged(n, sh.segment(lmHead && !valueHead), int64(s.bucketValues()), s.Ranks, s.gradPage())
	if !s.gradPages() {
		return (n + own) * 4, fmt.Sprintf("fp32, one arena and the ZeRO-2 shard of %d values: this CUDA device has no virtual memory management and cannot give back the arena's sent buckets (it would hold %.2f GiB)",
			own, float64((own+tr)*4)/GiB)
	}
	how := ""
	if s.Device == "cuda" {
		how = fmt.Sprintf(", %d sent buckets waiting for the stream; given back and mapped again in 2 MiB VMM chunks", CUDAPending)
	}
	return (own + tr) * 4, fmt.Sprintf("fp32, ZeRO-2: a shard of %d values on rank 0 of %d, and at most %d of the arena's %d at once (the largest run the backward writes between two sends, %d buckets in flight, the bucket above%s)",
		own, s.Ranks, tr, n, ZeroInflight, how)
}

// dpItem is the plan line of the data-parallel communication scratch.
func (s Settings) dpItem(scratch int64) (Item, bool) {
	if s.Ranks < 2 {
		return Item{}, false
	}
	mb := float64(s.bucketValues()) * 4 / (1 << 20)
	switch s.stage() {
	case 0:
		return Item{Name: "data-parallel scratch", Detail: fmt.Sprintf("none: %d ranks all-reduce the fp32 gradients in place, %.4g MB buckets", s.Ranks, mb)}, true
	case 1:
		return Item{Name: "data-parallel scratch", Bytes: scratch,
			Detail: fmt.Sprintf("ZeRO-1 over %d ranks: a reduce-scatter/all-gather chunk of each %.4g MB bucket (and the padded last bucket) per optimizer", s.Ranks, mb)}, true
	}
	return Item{Name: "data-parallel scratch", Bytes: scratch,
		Detail: fmt.Sprintf("ZeRO-2 over %d ranks: a receive chunk per bucket in flight (%d, %.4g MB buckets) and the padded last bucket, per optimizer", s.Ranks, ZeroInflight, mb)}, true
}
