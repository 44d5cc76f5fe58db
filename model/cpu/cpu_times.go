package cpu

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/r1go/r1go/internal/pool"
	"github.com/r1go/r1go/model"
)

// Wall time by operation on the CPU device: where a decode step's
// milliseconds go, as a profile cannot say (a CPU profile counts the
// cycles of every thread; a step's length is the caller's wall clock,
// which also holds the waits at each parallel loop's end). While TimeOps
// is on, the device adds each call's wall time to its operation; the
// calls come one at a time from the model's goroutine, so the sums split
// the step without overlap (a call from another goroutine meanwhile, or
// from inside a timed one, is not counted).

// cpuOp is an operation the CPU device times.
type cpuOp int

const (
	opGemm cpuOp = iota
	opAttention
	opRMSNorm
	opSwiGLU
	opAdd
	opAddBias
	opRoPE
	opEmbedding
	opCopy
	opSample
	numOps
)

var opNames = [numOps]string{"products", "attention", "norm", "swiglu", "add", "bias", "rope", "embedding", "copy", "sampling"}

// OpTimes holds the wall time and calls of each timed operation.
type OpTimes struct {
	ns, calls, waits [numOps]atomic.Int64
	joinsFrom        time.Duration // pool.JoinWait when timing began
	joinsTo          atomic.Int64  // and when it ended (-1: not yet)
}

// JoinWait is how long, while timing was on (so far, if it still is),
// parallel loops' callers waited at the loops' ends for the other
// threads' last tasks (pool.TimeJoins): the cost of uneven tasks and late
// helpers.
func (t *OpTimes) JoinWait() time.Duration {
	to := time.Duration(t.joinsTo.Load())
	if to < 0 {
		to = pool.JoinWait()
	}
	return to - t.joinsFrom
}

// OpTime is one operation's share of an OpTimes: Wait is the part of
// Time its parallel loops' callers spent waiting at the loops' ends.
type OpTime struct {
	Op         string
	Time, Wait time.Duration
	Calls      int64
}

// Split lists the operations that ran, the longest first.
func (t *OpTimes) Split() []OpTime {
	var s []OpTime
	for op := range numOps {
		if c := t.calls[op].Load(); c > 0 {
			s = append(s, OpTime{opNames[op], time.Duration(t.ns[op].Load()), time.Duration(t.waits[op].Load()), c})
		}
	}
	slices.SortStableFunc(s, func(a, b OpTime) int { return int(b.Time - a.Time) })
	return s
}

// TimeOps(dev, true) makes dev, a CPU device, add its operations' wall
// time to a fresh OpTimes from now on and returns it; TimeOps(dev,
// false) stops that. Other devices return nil.
func TimeOps(dev model.Device, on bool) *OpTimes {
	ct, ok := dev.(opTimer)
	if !ok {
		return nil
	}
	var t *OpTimes
	if on {
		t = &OpTimes{joinsFrom: pool.JoinWait()}
		t.joinsTo.Store(-1)
		pool.TimeJoins(true)
	} else if old := ct.timesNow(); old != nil {
		pool.TimeJoins(false)
		old.joinsTo.Store(int64(pool.JoinWait()))
	}
	ct.setTimes(t)
	return t
}

// opTimer is a device that times its operations.
type opTimer interface {
	setTimes(t *OpTimes)
	timesNow() *OpTimes
	timed(op cpuOp) func()
}

func (d *Device[F]) setTimes(t *OpTimes) { d.times.Store(t) }
func (d *Device[F]) timesNow() *OpTimes  { return d.times.Load() }

// timed starts timing one call of op; the returned func ends it. A call
// made inside a timed one (the LM head's product inside Logits) counts
// as the outer one's. Untimed, it costs a load and a call.
func (d *Device[F]) timed(op cpuOp) func() {
	t := d.times.Load()
	if t == nil || !d.timing.CompareAndSwap(false, true) {
		return untimed
	}
	t0, w0 := time.Now(), pool.JoinWait()
	return func() {
		t.ns[op].Add(int64(time.Since(t0)))
		t.waits[op].Add(int64(pool.JoinWait() - w0))
		t.calls[op].Add(1)
		d.timing.Store(false)
	}
}

func untimed() {}
