package env

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Batcher coalesces concurrent Retrieve calls into one call of the wrapped
// Retriever, as Agent-R1 groups all search calls of a rollout turn into one
// batched request. Episodes run concurrently and each calls its tool
// alone; behind a Batcher a remote retriever sees one request per window
// instead of one per episode.
//
// A batch is sent when it holds MaxQueries queries or MaxWait after its
// first call, whichever comes first. Calls with different k go in
// different batches. A caller whose context ends stops waiting; the batch
// still runs for the others.
type Batcher struct {
	r          Retriever
	maxWait    time.Duration
	maxQueries int
	timeout    time.Duration

	mu      sync.Mutex
	pending map[int]*pendingBatch // by k
}

type pendingBatch struct {
	queries []string
	calls   []batchCall
	timer   *time.Timer
}

type batchCall struct {
	lo, hi int // the caller's queries in the batch
	done   chan batchResult
}

type batchResult struct {
	hits [][]Hit
	err  error
}

// NewBatcher wraps r. maxWait is how long a first call waits for company
// (a few milliseconds), maxQueries caps a batch, and timeout bounds the
// batched call itself (0: none), since no single caller's context governs it.
func NewBatcher(r Retriever, maxWait time.Duration, maxQueries int, timeout time.Duration) (*Batcher, error) {
	if r == nil || maxWait < 0 || maxQueries < 1 || timeout < 0 {
		return nil, fmt.Errorf("env: batcher: need a retriever, maxWait >= 0, maxQueries >= 1, timeout >= 0")
	}
	return &Batcher{r: r, maxWait: maxWait, maxQueries: maxQueries, timeout: timeout, pending: map[int]*pendingBatch{}}, nil
}

// Retrieve implements Retriever.
func (b *Batcher) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if len(queries) == 0 {
		return nil, nil
	}
	done := make(chan batchResult, 1)
	b.mu.Lock()
	pb := b.pending[k]
	if pb == nil {
		pb = &pendingBatch{}
		b.pending[k] = pb
		pb.timer = time.AfterFunc(b.maxWait, func() { b.flush(k, pb) })
	}
	lo := len(pb.queries)
	pb.queries = append(pb.queries, queries...)
	pb.calls = append(pb.calls, batchCall{lo: lo, hi: len(pb.queries), done: done})
	full := len(pb.queries) >= b.maxQueries
	b.mu.Unlock()
	if full {
		b.flush(k, pb)
	}
	select {
	case r := <-done:
		return r.hits, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends pb once, whoever gets here first (the timer or a full batch).
func (b *Batcher) flush(k int, pb *pendingBatch) {
	b.mu.Lock()
	if b.pending[k] != pb {
		b.mu.Unlock()
		return
	}
	delete(b.pending, k)
	pb.timer.Stop()
	b.mu.Unlock()

	ctx := context.Background()
	if b.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	hits, err := b.r.Retrieve(ctx, pb.queries, k)
	if err == nil && len(hits) != len(pb.queries) {
		err = fmt.Errorf("env: batcher: retriever answered %d of %d queries", len(hits), len(pb.queries))
	}
	for _, c := range pb.calls {
		if err != nil {
			c.done <- batchResult{err: err}
		} else {
			c.done <- batchResult{hits: hits[c.lo:c.hi]}
		}
	}
}
