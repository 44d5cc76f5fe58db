package env

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
)

// echoRetriever answers query q with one hit whose ID is q and k, and
// records the size of every batch it is given.
type echoRetriever struct {
	mu      sync.Mutex
	batches []int
	fail    bool
}

func (e *echoRetriever) Retrieve(_ context.Context, qs []string, k int) ([][]Hit, error) {
	e.mu.Lock()
	e.batches = append(e.batches, len(qs))
	e.mu.Unlock()
	if e.fail {
		return nil, errors.New("backend down")
	}
	out := make([][]Hit, len(qs))
	for i, q := range qs {
		out[i] = []Hit{{Passage: data.Passage{ID: q + "/" + strconv.Itoa(k)}}}
	}
	return out, nil
}

func TestBatcherCoalescesAndRoutes(t *testing.T) {
	inner := &echoRetriever{}
	b, err := NewBatcher(inner, 50*time.Millisecond, 1000, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := 3 + i%2
			qs := []string{"q" + strconv.Itoa(i), "r" + strconv.Itoa(i)}
			hits, err := b.Retrieve(context.Background(), qs, k)
			if err != nil {
				errs <- err
				return
			}
			for j, q := range qs {
				if len(hits) != 2 || hits[j][0].Passage.ID != q+"/"+strconv.Itoa(k) {
					errs <- errors.New("caller " + strconv.Itoa(i) + " got another caller's hits")
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range inner.batches {
		total += n
	}
	// 40 callers with two values of k: far fewer calls than callers
	if total != 80 || len(inner.batches) > 10 {
		t.Fatalf("batches %v", inner.batches)
	}
}

func TestBatcherFullBatchAndErrors(t *testing.T) {
	inner := &echoRetriever{}
	b, _ := NewBatcher(inner, time.Hour, 2, 0) // only a full batch can go
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Retrieve(context.Background(), []string{"a"}, 1); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(inner.batches) != 1 || inner.batches[0] != 2 {
		t.Fatalf("batches %v", inner.batches)
	}
	failing := &echoRetriever{fail: true}
	fb, _ := NewBatcher(failing, time.Millisecond, 10, 0)
	if _, err := fb.Retrieve(context.Background(), []string{"a"}, 1); err == nil || err.Error() != "backend down" {
		t.Fatalf("error not passed on: %v", err)
	}
	// a caller that gives up does not block the batch
	slow, _ := NewBatcher(inner, 200*time.Millisecond, 10, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := slow.Retrieve(ctx, []string{"a"}, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if _, err := NewBatcher(nil, 0, 1, 0); err == nil {
		t.Fatal("nil retriever accepted")
	}
}
