package cuda

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/r1go/r1go/model"
)

// Decode steps as CUDA graphs. A decode step is a few hundred small
// kernels and GEMMs whose launch cost, not their math, bounds its time;
// between steps only the contents of a few host arrays change (token ids,
// positions, cache rows, seeds), never the launch geometry, as long as the
// number of rows and the buffers stay the same. GraphStep records the
// step's device work once and replays it: on later calls it runs the
// step's Go code in rebind mode, in which the Device queues nothing except
// the uploads of the host arrays into the device buffers the graph reads,
// then launches the graph.

// intCall is one d.ints call of a captured step, in call order.
type intCall struct {
	kind  string
	entry *intEntry
}

// stepGraph is a recorded step: nil g when its work was not capturable.
type stepGraph struct {
	g     *Graph
	calls []intCall
	gen   int // d.scratchGen when recorded
}

// rebindState is the Device's state while a step runs in rebind mode.
type rebindState struct {
	on      bool
	calls   []intCall
	next    int
	written map[*intEntry]bool
	err     error
}

// GraphStep runs fn, the device work of one step, as a graph replay. key
// names the step's shape: everything the launches depend on other than
// the contents of the host arrays fn passes to Device ops (row count,
// buffers). The first call with a key runs fn, then records it as a graph
// (fn runs a second time under capture, queuing nothing that executes),
// so fn must have no side effects outside the Device ops. Later calls
// replay the graph after writing fn's host arrays into the buffers it
// reads; when fn's calls do not match the recording (another order, a
// length change, an allocation) the graph is dropped and the step runs
// and is recorded afresh. Work that cannot be captured runs plainly. It
// satisfies model.StepGrapher.
func (d *Device) GraphStep(key string, fn func()) error {
	if sg, ok := d.stepGraphs[key]; ok {
		if sg.g == nil {
			fn()
			return nil
		}
		if sg.gen == d.scratchGen && d.rebind(sg, fn) == nil {
			sg.g.Launch()
			d.stepReplays++
			return nil
		}
		sg.g.Destroy()
		delete(d.stepGraphs, key)
	}
	fn() // puts the host arrays on the device and sizes the scratch buffers
	d.mu.Lock()
	gen := d.scratchGen
	d.recordInts, d.intCalls = true, nil
	d.mu.Unlock()
	g, err := d.Capture(fn)
	d.mu.Lock()
	calls := d.intCalls
	d.recordInts, d.intCalls = false, nil
	d.mu.Unlock()
	if errors.Is(err, ErrCapture) {
		d.stepGraphs[key] = &stepGraph{}
		return nil
	}
	if err != nil {
		return err
	}
	if gen != d.scratchGen { // the capture moved a scratch buffer: record next time
		g.Destroy()
		return nil
	}
	d.stepGraphs[key] = &stepGraph{g: g, calls: calls, gen: d.scratchGen}
	return nil
}

// StepGraphs returns the number of recorded steps that replay as graphs
// and the number of replays so far.
func (d *Device) StepGraphs() (graphs, replays int) {
	for _, sg := range d.stepGraphs {
		if sg.g != nil {
			graphs++
		}
	}
	return graphs, d.stepReplays
}

// rebind runs fn in rebind mode against the recording sg.
func (d *Device) rebind(sg *stepGraph, fn func()) (err error) {
	d.mu.Lock()
	d.rb = rebindState{on: true, calls: sg.calls, written: map[*intEntry]bool{}}
	d.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: step in rebind mode: %v", r)
		}
		d.mu.Lock()
		if err == nil {
			err = d.rb.err
		}
		if err == nil && d.rb.next != len(d.rb.calls) {
			err = fmt.Errorf("cuda: step passed %d host arrays, the recording %d", d.rb.next, len(d.rb.calls))
		}
		d.rb = rebindState{}
		d.mu.Unlock()
	}()
	fn()
	return nil
}

// rebindFail records why the step in rebind mode cannot replay.
func (d *Device) rebindFail(format string, args ...any) {
	if d.rb.err == nil {
		d.rb.err = fmt.Errorf("cuda: rebinding a step graph: "+format, args...)
	}
}

// rebindInts is d.ints in rebind mode: the array goes into the buffer the
// recorded call at this position used.
func (d *Device) rebindInts(kind string, vals []int32) uintptr {
	rb := &d.rb
	if rb.next >= len(rb.calls) {
		d.rebindFail("more host arrays than recorded (%s)", kind)
		return 0
	}
	c := rb.calls[rb.next]
	rb.next++
	e := c.entry
	if c.kind != kind || len(e.vals) != len(vals) {
		d.rebindFail("host array %d is %s of %d, recorded %s of %d", rb.next-1, kind, len(vals), c.kind, len(e.vals))
		return 0
	}
	if slices.Equal(e.vals, vals) {
		rb.written[e] = true
		return e.buf.ptr
	}
	if rb.written[e] { // two calls shared a buffer when recorded; now they differ
		d.rebindFail("recorded %s buffer is shared by arrays that now differ", kind)
		return 0
	}
	rb.written[e] = true
	copy(e.vals, vals)
	if len(vals) > 0 {
		d.fail(d.drv.check(call(d.drv.cuMemcpyHtoDAsync, e.buf.ptr, uintptr(unsafe.Pointer(&vals[0])), uintptr(4*len(vals)), d.stream), "cuMemcpyHtoDAsync_v2"))
	}
	return e.buf.ptr
}

var _ model.StepGrapher = (*Device)(nil)
