package env

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// SlowRetriever is a Retriever with a long latency tail: the share
// Fraction of queries take Delay longer than R alone, as a retriever behind
// a loaded service does. It is how the trainer's behaviour under slow tools
// is measured (asynchronous training, continuous batching) on a local
// index that answers in microseconds.
//
// Which queries are slow is a function of the query text (FNV-1a, then
// MurmurHash3's 64-bit finaliser), not of time or call order, so a run's
// slow calls are the same on every run: the latency never changes what a
// search returns, only when.
type SlowRetriever struct {
	R        Retriever
	Fraction float64       // share of queries delayed, in [0, 1]
	Delay    time.Duration // added to each delayed query
}

// NewSlowRetriever wraps r; fraction outside [0, 1] or a negative delay is
// an error naming the value.
func NewSlowRetriever(r Retriever, fraction float64, delay time.Duration) (*SlowRetriever, error) {
	if !(fraction >= 0 && fraction <= 1) {
		return nil, fmt.Errorf("env: slow retriever fraction %v is not in [0, 1]", fraction)
	}
	if delay < 0 {
		return nil, fmt.Errorf("env: slow retriever delay %v is negative", delay)
	}
	return &SlowRetriever{R: r, Fraction: fraction, Delay: delay}, nil
}

// Slow reports whether query is one of the delayed ones.
func (s *SlowRetriever) Slow(query string) bool {
	h := fnv.New64a()
	h.Write([]byte(query))
	// FNV's high bits barely change between queries that differ at the
	// end; MurmurHash3's finaliser spreads every bit over the word before
	// the top 53 become a uniform number in [0, 1).
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return float64(x>>11)/(1<<53) < s.Fraction
}

// Retrieve waits Delay when any of queries is slow (a batch is as slow as
// its slowest query), or until ctx is done, then asks R.
func (s *SlowRetriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	for _, q := range queries {
		if s.Delay > 0 && s.Slow(q) {
			t := time.NewTimer(s.Delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			break
		}
	}
	return s.R.Retrieve(ctx, queries, k)
}
