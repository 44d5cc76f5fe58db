package env

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
)

// countingRetriever answers every query with one hit naming it.
type countingRetriever struct{ calls int }

func (c *countingRetriever) Retrieve(_ context.Context, queries []string, k int) ([][]Hit, error) {
	c.calls++
	out := make([][]Hit, len(queries))
	for i, q := range queries {
		out[i] = []Hit{{Passage: data.Passage{Title: q}}}
	}
	return out, nil
}

// TestSlowRetriever: the delayed share of queries is Fraction (within
// sampling error over 20,000 queries), the same queries on every call, a
// slow query waits Delay and a fast one does not, the answers are R's, a
// done context cuts the wait, and bad settings are errors.
func TestSlowRetriever(t *testing.T) {
	inner := &countingRetriever{}
	s, err := NewSlowRetriever(inner, 0.1, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	slow, fast := "", ""
	n := 0
	for i := 0; i < 20000; i++ {
		q := fmt.Sprintf("who founded company %d", i)
		if s.Slow(q) {
			n++
			slow = q
		} else {
			fast = q
		}
		if s.Slow(q) != s.Slow(q) {
			t.Fatalf("query %q is slow on one call and fast on another", q)
		}
	}
	// The binomial's std over 20,000 draws at 0.1 is 0.0021: 5 of them.
	if got := float64(n) / 20000; got < 0.0894 || got > 0.1106 {
		t.Errorf("%.4f of queries slow, want 0.1", got)
	}
	start := time.Now()
	hits, err := s.Retrieve(context.Background(), []string{fast, slow}, 1)
	if took := time.Since(start); err != nil || took < 30*time.Millisecond || hits[1][0].Passage.Title != slow {
		t.Errorf("a batch with a slow query: %v after %v, hits %v", err, took, hits)
	}
	start = time.Now()
	if _, err := s.Retrieve(context.Background(), []string{fast}, 1); err != nil || time.Since(start) >= 30*time.Millisecond {
		t.Errorf("a fast query: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Retrieve(ctx, []string{slow}, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a slow query under a done context: %v, want context.Canceled", err)
	}
	if inner.calls != 2 {
		t.Errorf("the inner retriever was asked %d times, want 2 (not for the cancelled query)", inner.calls)
	}
	for _, bad := range []struct {
		f float64
		d time.Duration
	}{{-0.1, time.Second}, {1.5, time.Second}, {0.1, -time.Second}} {
		if _, err := NewSlowRetriever(inner, bad.f, bad.d); err == nil {
			t.Errorf("fraction %v delay %v accepted", bad.f, bad.d)
		}
	}
}
