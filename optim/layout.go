package optim

// ShardLayout is how ZeRO cuts a flat arena of N values over Ranks ranks:
// into buckets of Ranks·Bucket values, each bucket into Ranks equal chunks
// of ⌈L/Ranks⌉ values (L the bucket's length), rank r owning chunk r of
// every bucket, so rank 0 owns a whole chunk of each and holds the most.
// The last bucket, when its length does not divide by Ranks, is padded to
// a multiple of it for the collectives. rl/dp's sharded optimizers are
// built from it and model/plan sizes them with it, so the two cannot
// drift apart.
type ShardLayout struct {
	N      int // values in the arena
	Bucket int // values per rank and bucket (NewShardLayout's clipped bucket)
	Ranks  int
}

// ShardsInFlight is how many gradient buckets a ZeRO-2 rank has in
// flight at once: one reduce-scatter sending while the next is filled.
// Each needs a receive chunk.
const ShardsInFlight = 2

// NewShardLayout lays out an arena of n values over ranks ranks with an
// all-reduce bucket of bucket values, clipped to one rank's share so that
// a small arena still spreads over every rank.
func NewShardLayout(n, bucket, ranks int) ShardLayout {
	ranks = max(ranks, 1)
	return ShardLayout{N: n, Bucket: max(1, min(bucket, (n+ranks-1)/ranks)), Ranks: ranks}
}

// Spans is rank r's chunks, in increasing order, and how many values they
// hold.
func (l ShardLayout) Spans(r int) (spans []Span, own int) {
	size := l.Ranks * l.Bucket
	for off := 0; off < l.N; off += size {
		L := min(size, l.N-off)
		c := (L + l.Ranks - 1) / l.Ranks
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			spans = append(spans, Span{Off: lo, N: hi - lo})
			own += hi - lo
		}
	}
	return spans, own
}

// Padded is the length of the padded last bucket, or 0 when every
// bucket's length divides by Ranks.
func (l ShardLayout) Padded() int {
	if last := l.N % (l.Ranks * l.Bucket); last != 0 && last%l.Ranks != 0 {
		return l.Ranks * ((last + l.Ranks - 1) / l.Ranks)
	}
	return 0
}
