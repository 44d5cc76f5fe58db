package model

import (
	"slices"
	"sync/atomic"
	"time"
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
	opLogits
	opEmbedding
	opCopy
	opSample
	numOps
)

var opNames = [numOps]string{"products", "attention", "norm", "swiglu", "add", "bias", "rope", "logits", "embedding", "copy", "sampling"}

// OpTimes holds the wall time and calls of each timed operation.
type OpTimes struct {
	ns, calls [numOps]atomic.Int64
}

// OpTime is one operation's share of an OpTimes.
type OpTime struct {
	Op    string
	Time  time.Duration
	Calls int64
}

// Split lists the operations that ran, the longest first.
func (t *OpTimes) Split() []OpTime {
	var s []OpTime
	for op := range numOps {
		if c := t.calls[op].Load(); c > 0 {
			s = append(s, OpTime{opNames[op], time.Duration(t.ns[op].Load()), c})
		}
	}
	slices.SortStableFunc(s, func(a, b OpTime) int { return int(b.Time - a.Time) })
	return s
}

// TimeOps(dev, true) makes dev, a CPU device, add its operations' wall
// time to a fresh OpTimes from now on and returns it; TimeOps(dev,
// false) stops that. Other devices return nil.
func TimeOps(dev Device, on bool) *OpTimes {
	ct, ok := dev.(opTimer)
	if !ok {
		return nil
	}
	var t *OpTimes
	if on {
		t = new(OpTimes)
	}
	ct.setTimes(t)
	return t
}

// opTimer is a device that times its operations.
type opTimer interface {
	setTimes(t *OpTimes)
	timed(op cpuOp) func()
}

func (d *CPU[F]) setTimes(t *OpTimes) { d.times.Store(t) }

// timed starts timing one call of op; the returned func ends it. A call
// made inside a timed one (the LM head's product inside Logits) counts
// as the outer one's. Untimed, it costs a load and a call.
func (d *CPU[F]) timed(op cpuOp) func() {
	t := d.times.Load()
	if t == nil || !d.timing.CompareAndSwap(false, true) {
		return untimed
	}
	t0 := time.Now()
	return func() {
		t.ns[op].Add(int64(time.Since(t0)))
		t.calls[op].Add(1)
		d.timing.Store(false)
	}
}

func untimed() {}

// timeOp is timed for any device: a no-op on those that do not time.
func timeOp(dev Device, op cpuOp) func() {
	if ct, ok := dev.(opTimer); ok {
		return ct.timed(op)
	}
	return untimed
}
