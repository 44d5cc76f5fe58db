// Package pool runs a loop's tasks on helper goroutines that stay awake
// between loops. The central function is For (ForWorker where each
// participant needs its own scratch). Nothing here returns an error; a
// panicking task crashes the program, as it would on a goroutine of its
// own.
//
// Why: a batch-32 decode step of Qwen2.5-0.5B is some 300-400 parallel loops
// of 20 µs to 2 ms, with a few microseconds of serial work between them.
// Started as fresh goroutines, each loop's helpers land on a core that
// went idle after the last loop, and on a virtual machine waking an idle
// vCPU costs tens to hundreds of microseconds: a product of 32 rows by 512
// of depth 896 ran no faster on two cores than on one. Here the helpers
// keep polling for the next loop (yielding to any other goroutine) for a
// while after each one (Spin), then sleep until a loop wakes them.
package pool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Spin is how long a helper keeps polling for the next loop before it
// sleeps: longer than the serial gaps inside a decode step, short enough
// that an idle program, or the other processes of a machine shared by
// several ranks, lose little. DecodeBatch05B/bf16-copy on 2 cores read
// the same (within this VM's 5 %) at 0.1, 0.5 and 2 ms, and less at 20 µs.
var Spin = 200 * time.Microsecond

// Fresh makes every loop start fresh goroutines, as before the pool: the
// benchmarks' same-run before.
var Fresh bool

// job is one loop: tasks [0, n) handed out one at a time to at most max
// participants, the caller being participant 0.
type job struct {
	id      uint64 // the loop's number, which the helpers remember
	n, max  int
	body    func(w, i int)
	next    atomic.Int64 // the next task to hand out
	joined  atomic.Int32 // participants so far
	pending atomic.Int64 // tasks not yet finished
}

// work runs tasks as participant w until none are left.
func (j *job) work(w int) {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.n {
			return
		}
		j.body(w, i)
		j.pending.Add(-1)
	}
}

var (
	busy     atomic.Bool         // a loop is being run: nested and concurrent loops start their own goroutines
	loops    atomic.Uint64       // loops run so far
	current  atomic.Pointer[job] // the loop the helpers look for
	sleeping atomic.Int32        // helpers waiting on wake
	wake     = make(chan struct{}, 256)
	mu       sync.Mutex // guards helpers
	helpers  int        // helper goroutines started
)

// For runs body(i) for every i in [0, n) on up to workers goroutines, the
// caller among them, and returns when every call has returned. Tasks go
// out one at a time in order, so uneven tasks balance; which goroutine
// runs a task is not fixed, so tasks must not depend on it.
func For(workers, n int, body func(i int)) {
	ForWorker(workers, n, func(_, i int) { body(i) })
}

// ForWorker is For with the participant's index w in [0, workers) passed
// to body: no two calls with the same w run at once, so body may keep
// scratch per participant.
func ForWorker(workers, n int, body func(w, i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			body(0, i)
		}
		return
	}
	if Fresh || !busy.CompareAndSwap(false, true) {
		spawn(workers, n, body)
		return
	}
	defer busy.Store(false)
	startHelpers(workers - 1)
	j := &job{id: loops.Add(1), n: n, max: workers, body: body}
	j.joined.Store(1)
	j.pending.Store(int64(n))
	current.Store(j)
	for s := sleeping.Load(); s > 0; s-- {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	j.work(0)
	if j.pending.Load() > 0 {
		var t0 time.Time
		timing := timingJoins.Load()
		if timing {
			t0 = time.Now()
		}
		for spins := 0; j.pending.Load() > 0; spins++ {
			if spins >= 64 {
				runtime.Gosched() // a helper still runs its last task
			}
		}
		if timing {
			joinWait.Add(int64(time.Since(t0)))
		}
	}
	current.Store(nil)
}

var (
	timingJoins atomic.Bool
	joinWait    atomic.Int64 // nanoseconds
)

// TimeJoins(true) makes every loop's caller add, from now on, the time it
// waits at the loop's end, its own tasks done, for the helpers' last ones
// (JoinWait); TimeJoins(false) stops that. That wait is where a loop's
// tasks came out uneven between the cores, or a helper started late: a
// decode step's products on two cores spend it once a product.
func TimeJoins(on bool) { timingJoins.Store(on) }

// JoinWait is the time waited at loops' ends while TimeJoins was on, in
// total since the program started.
func JoinWait() time.Duration { return time.Duration(joinWait.Load()) }

// spawn is ForWorker on fresh goroutines, for a loop started while
// another runs (from inside a task, or from another goroutine).
func spawn(workers, n int, body func(w, i int)) {
	j := &job{n: n, body: body}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { j.work(w) })
	}
	j.work(0)
	wg.Wait()
}

// startHelpers makes sure at least k helpers run.
func startHelpers(k int) {
	mu.Lock()
	defer mu.Unlock()
	for ; helpers < k; helpers++ {
		go helper()
	}
}

// helper joins each new loop it sees while places are left, polls for the
// next for Spin after each, then sleeps until a loop wakes it.
func helper() {
	var last uint64 // the last loop seen (not the job: its closure may hold large buffers)
	idleSince := time.Now()
	for polls := 0; ; polls++ {
		if j := current.Load(); j != nil && j.id != last {
			last = j.id
			if w := int(j.joined.Add(1)) - 1; w < j.max {
				j.work(w)
			}
			idleSince, polls = time.Now(), 0
			continue
		}
		if polls%64 == 63 && time.Since(idleSince) > Spin {
			sleeping.Add(1)
			// A loop published before the count rose is seen here; one
			// published after it finds the count and sends a token.
			if j := current.Load(); j == nil || j.id == last {
				<-wake
			}
			sleeping.Add(-1)
			idleSince, polls = time.Now(), 0
			continue
		}
		runtime.Gosched()
	}
}
