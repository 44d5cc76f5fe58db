package plan

import "fmt"

// Data parallel. Every rank holds the whole model, so a plan is per rank:
// the gradients are summed in place, bucket by bucket (no scratch of
// ours; the transport's own buffers are not counted), and with ZeRO-1 the
// AdamW moments are sharded. rl's ZeRO-1 layout cuts the arena into
// buckets of Ranks·B values (B = min(bucket, ⌈n/Ranks⌉)), each bucket into
// Ranks equal chunks, rank r owning chunk r of each; rank 0 owns a whole
// chunk of every bucket, so it holds the most. Beside its moments a rank
// keeps a chunk of receive scratch and, when the last bucket does not
// divide by Ranks, the padded last bucket.

// ZeroShard is what rank 0 of ranks holds of an arena of n values under
// ZeRO-1 with an all-reduce bucket of bucket values: own values of the
// moments, and scratch float32 values (rl/dp_zero.go allocates the same).
func ZeroShard(n, bucket, ranks int) (own, scratch int64) {
	if ranks < 2 {
		return int64(n), 0
	}
	b := max(1, min(bucket, (n+ranks-1)/ranks))
	for off := 0; off < n; off += ranks * b {
		L := min(ranks*b, n-off)
		own += int64((L + ranks - 1) / ranks)
	}
	scratch = int64(b)
	if last := n % (ranks * b); last != 0 && last%ranks != 0 {
		scratch += int64(ranks * ((last + ranks - 1) / ranks))
	}
	return own, scratch
}

// bucketValues is the all-reduce bucket in float32 values (rl.DP.bucket).
func (s Settings) bucketValues() int {
	mb := s.BucketMB
	if mb <= 0 {
		mb = 25
	}
	return max(1, int(mb*(1<<20)/4))
}

// zero1 says whether the optimizer state is sharded.
func (s Settings) zero1() bool { return s.Zero1 && s.Ranks > 1 }

// moments is the bytes of an AdamW's two moments over an arena of n
// values at sb bytes each, and the ZeRO-1 scratch, per rank; what says how.
func (s Settings) moments(n, sb int64) (state, scratch int64, what string) {
	if !s.zero1() {
		return 2 * n * sb, 0, ""
	}
	own, sc := ZeroShard(int(n), s.bucketValues(), s.Ranks)
	return 2 * own * sb, sc * 4, fmt.Sprintf(", ZeRO-1 shard: %d of %d values on rank 0 of %d", own, n, s.Ranks)
}

// dpItem is the plan line of the data-parallel communication scratch.
func (s Settings) dpItem(scratch int64) (Item, bool) {
	if s.Ranks < 2 {
		return Item{}, false
	}
	mb := float64(s.bucketValues()) * 4 / (1 << 20)
	if !s.zero1() {
		return Item{Name: "data-parallel scratch", Detail: fmt.Sprintf("none: %d ranks all-reduce the fp32 gradients in place, %.4g MB buckets", s.Ranks, mb)}, true
	}
	return Item{Name: "data-parallel scratch", Bytes: scratch,
		Detail: fmt.Sprintf("ZeRO-1 over %d ranks: a reduce-scatter/all-gather chunk of each %.4g MB bucket (and the padded last bucket) per optimizer", s.Ranks, mb)}, true
}
