package cuda

import (
	"fmt"
	"unsafe"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
)

// NCCL's second stream. ReduceScatterAsync queues a reduce-scatter on a
// stream of the communicator's own, after the work queued so far on the
// device's stream (an event that stream records and the side stream
// waits for), and returns at once: the backward's next kernels run on the
// device's stream while NCCL moves the bucket. Its wait makes the device's
// stream wait for the collective (a second event), so the kernel that
// adds the received chunk into the gradient shard runs after it, still
// without a host wait. This is model.AsyncComm, which rl's ZeRO-2 uses in
// place of its communication goroutine. It is compile- and load-checked
// only: no GPU has run it.

// CUDA driver flags (cuda.h).
const (
	cuStreamNonBlocking  = 1 // CU_STREAM_NON_BLOCKING
	cuEventDisableTiming = 2 // CU_EVENT_DISABLE_TIMING
)

// sideStream is the second stream and the driver calls it needs beyond
// the device's table.
type sideStream struct {
	stream                                       uintptr
	waitEvent, eventCreate, eventRecord, destroy uintptr
}

// side creates the second stream on first use; the caller holds the
// device (enter).
func (c *NCCL) side() (*sideStream, error) {
	if c.ss != nil {
		return c.ss, nil
	}
	s := &sideStream{}
	if err := c.dev.drv.lib.bindAll([]binding{
		bind(&s.waitEvent, "cuStreamWaitEvent"), bind(&s.eventCreate, "cuEventCreate"),
		bind(&s.eventRecord, "cuEventRecord"), bind(&s.destroy, "cuEventDestroy_v2", "cuEventDestroy"),
	}); err != nil {
		return nil, fmt.Errorf("cuda: NCCL's second stream: %w", err)
	}
	if err := c.dev.drv.check(call(c.dev.drv.cuStreamCreate, uintptr(unsafe.Pointer(&s.stream)), cuStreamNonBlocking), "cuStreamCreate"); err != nil {
		return nil, err
	}
	c.ss = s
	return s, nil
}

// event records an event on stream and returns it.
func (c *NCCL) event(s *sideStream, stream uintptr) (uintptr, error) {
	var ev uintptr
	if err := c.dev.drv.check(call(s.eventCreate, uintptr(unsafe.Pointer(&ev)), cuEventDisableTiming), "cuEventCreate"); err != nil {
		return 0, err
	}
	return ev, c.dev.drv.check(call(s.eventRecord, ev, stream), "cuEventRecord")
}

// ReduceScatterAsync is ReduceScatter on the second stream (see above).
func (c *NCCL) ReduceScatterAsync(dst, src model.Buffer) (func() error, error) {
	d, s := c.buf(dst), c.buf(src)
	comm.CheckCollective("ReduceScatter", d.n, s.n, c.size)
	defer c.dev.enter()()
	ss, err := c.side()
	if err != nil {
		return nil, err
	}
	ready, err := c.event(ss, c.dev.stream) // the gradients of the bucket are written
	if err != nil {
		return nil, err
	}
	defer call(ss.destroy, ready) // freed by the driver once the stream has passed it
	if err := c.dev.drv.check(call(ss.waitEvent, ss.stream, ready, 0), "cuStreamWaitEvent"); err != nil {
		return nil, err
	}
	if err := c.l.check(call(c.l.reduceScatter, s.ptr, d.ptr, uintptr(d.n), ncclType(d), ncclSum, c.comm, ss.stream), "ncclReduceScatter"); err != nil {
		return nil, err
	}
	done, err := c.event(ss, ss.stream)
	if err != nil {
		return nil, err
	}
	return func() error {
		defer c.dev.enter()()
		defer call(ss.destroy, done)
		return c.dev.drv.check(call(ss.waitEvent, c.dev.stream, done, 0), "cuStreamWaitEvent")
	}, nil
}

var _ model.AsyncComm = (*NCCL)(nil)
