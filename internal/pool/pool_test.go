package pool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestForRunsEveryTaskOnce runs loops of 0 to 300 tasks on 1 to 5
// participants, back to back: every index exactly once, and no two tasks
// with the same participant index at the same time.
func TestForRunsEveryTaskOnce(t *testing.T) {
	for workers := 1; workers <= 5; workers++ {
		for _, n := range []int{0, 1, 2, 3, 7, 64, 300} {
			counts := make([]atomic.Int32, n)
			var inside [8]atomic.Int32
			var clash atomic.Bool
			ForWorker(workers, n, func(w, i int) {
				if w < 0 || w >= workers {
					t.Errorf("participant %d of %d", w, workers)
					return
				}
				if inside[w].Add(1) != 1 {
					clash.Store(true)
				}
				counts[i].Add(1)
				time.Sleep(time.Duration(i%3) * time.Microsecond)
				inside[w].Add(-1)
			})
			for i := range counts {
				if c := counts[i].Load(); c != 1 {
					t.Fatalf("%d workers, %d tasks: task %d ran %d times", workers, n, i, c)
				}
			}
			if clash.Load() {
				t.Fatalf("%d workers, %d tasks: two tasks ran at once as one participant", workers, n)
			}
		}
	}
}

// TestForWakesSleepingHelpers lets the helpers go to sleep (three times
// Spin), then runs a loop of two tasks on two participants in which task 0
// waits for task 1 to start: it can finish only if a sleeping helper
// wakes and takes task 1.
func TestForWakesSleepingHelpers(t *testing.T) {
	For(2, 2, func(int) {}) // a helper exists
	for round := range 3 {
		time.Sleep(3 * Spin)
		started := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			For(2, 2, func(i int) {
				if i == 1 {
					close(started)
					return
				}
				<-started
			})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the second task never started: no helper woke", round)
		}
	}
}

// TestForNestedAndConcurrent starts loops from inside tasks and from
// several goroutines at once (they run on goroutines of their own): every
// inner task runs once.
func TestForNestedAndConcurrent(t *testing.T) {
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			For(3, 10, func(int) {
				For(2, 5, func(int) { total.Add(1) })
			})
		})
	}
	wg.Wait()
	if got := total.Load(); got != 4*10*5 {
		t.Fatalf("%d inner tasks ran, want %d", got, 4*10*5)
	}
}

// BenchmarkForEmpty times a loop of two empty tasks on two participants
// back to back (the pool's own cost), beside fresh goroutines (spawn).
func BenchmarkForEmpty(b *testing.B) {
	body := func(w, i int) {}
	b.Run("pool", func(b *testing.B) {
		for b.Loop() {
			ForWorker(2, 2, body)
		}
	})
	b.Run("spawn", func(b *testing.B) {
		for b.Loop() {
			spawn(2, 2, body)
		}
	})
}

// TestTimeJoins: a loop whose helper's task takes 50 ms while the caller's
// ends as soon as the helper has started adds about that to JoinWait; with
// TimeJoins off, nothing is added.
func TestTimeJoins(t *testing.T) {
	For(2, 2, func(int) {}) // a helper exists
	run := func() bool {
		var helped atomic.Bool
		ForWorker(2, 2, func(w, _ int) {
			if w != 0 {
				helped.Store(true)
				time.Sleep(50 * time.Millisecond)
				return
			}
			for deadline := time.Now().Add(time.Second); !helped.Load() && time.Now().Before(deadline); {
				runtime.Gosched()
			}
		})
		return helped.Load()
	}
	TimeJoins(true)
	defer TimeJoins(false)
	for try := 0; ; try++ {
		before := JoinWait()
		if !run() {
			if try == 20 {
				t.Skip("no helper joined a loop in 20 tries")
			}
			continue
		}
		if waited := JoinWait() - before; waited < 25*time.Millisecond || waited > 5*time.Second {
			t.Fatalf("a helper's 50 ms task: the caller waited %v at the loop's end", waited)
		}
		break
	}
	TimeJoins(false)
	before := JoinWait()
	for range 3 {
		run()
	}
	if got := JoinWait(); got != before {
		t.Fatalf("with TimeJoins off the waits rose from %v to %v", before, got)
	}
}
