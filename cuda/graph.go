package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// Graph is work recorded from the Device's stream once and replayed with
// a single launch (a CUDA graph). A decode step is hundreds of small
// kernels whose launch overhead, not their math, bounds the step time;
// replaying them as one graph removes it.
//
// Captured work must be replayable as recorded: it may not upload host
// data, allocate or free device memory, or wait for the GPU. Device ops
// meet that when every host array they take (token ids, positions,
// sequence offsets) is already on the device: run the work once before
// capturing, with the same host arrays, and the capture reuses those
// device copies (the content-keyed int cache), which stay alive until the
// Graph is destroyed. Replays read the device buffers as they are at
// launch time, so a step whose inputs change between replays must write
// them into the captured buffers first (Upload, outside the graph).
type Graph struct {
	d           *Device
	graph, exec uintptr
	pinned      []*intEntry
}

// streamCaptureModeRelaxed lets other threads make driver calls during a
// capture: a goroutine may move between OS threads while it queues work.
const streamCaptureModeRelaxed = 2

// ErrCapture is returned by Capture when the captured work could not be
// recorded as a graph (it uploaded host data, allocated memory, or waited).
var ErrCapture = errors.New("cuda: work is not capturable into a graph")

// Capture records the work fn queues on the device into a Graph instead of
// running it.
func (d *Device) Capture(fn func()) (*Graph, error) {
	if d.drv.cuStreamBeginCapture == 0 || d.drv.cuGraphInstantiate == 0 {
		return nil, fmt.Errorf("cuda: this driver has no stream capture (cuStreamBeginCapture_v2, cuGraphInstantiateWithFlags)")
	}
	if err := d.Sync(); err != nil {
		return nil, err
	}
	leave := d.enter()
	err := d.drv.check(call(d.drv.cuStreamBeginCapture, d.stream, streamCaptureModeRelaxed), "cuStreamBeginCapture_v2")
	if err == nil {
		d.capturing = true
		d.captureErr = nil
		d.capturePins = nil
	}
	leave()
	if err != nil {
		return nil, err
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				d.mu.Lock()
				d.captureErr = fmt.Errorf("%w: %v", ErrCapture, r)
				d.mu.Unlock()
			}
		}()
		fn()
	}()
	defer d.enter()()
	g := &Graph{d: d, pinned: d.capturePins}
	d.capturing = false
	endErr := d.drv.check(call(d.drv.cuStreamEndCapture, d.stream, uintptr(unsafe.Pointer(&g.graph))), "cuStreamEndCapture")
	asyncErr := d.err
	d.err = nil
	for _, e := range []error{d.captureErr, asyncErr, endErr} {
		if e != nil {
			if g.graph != 0 {
				call(d.drv.cuGraphDestroy, g.graph)
			}
			g.unpin()
			return nil, e
		}
	}
	if err := d.drv.check(call(d.drv.cuGraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), g.graph, 0), "cuGraphInstantiateWithFlags"); err != nil {
		call(d.drv.cuGraphDestroy, g.graph)
		g.unpin()
		return nil, err
	}
	return g, nil
}

// Launch queues one replay of the graph on the device's stream.
func (g *Graph) Launch() {
	defer g.d.enter()()
	g.d.fail(g.d.drv.check(call(g.d.drv.cuGraphLaunch, g.exec, g.d.stream), "cuGraphLaunch"))
}

// Destroy waits for queued replays and releases the graph.
func (g *Graph) Destroy() {
	d := g.d
	defer d.enter()()
	d.fail(d.drv.check(call(d.drv.cuStreamSynchronize, d.stream), "cuStreamSynchronize"))
	call(d.drv.cuGraphExecDestroy, g.exec)
	call(d.drv.cuGraphDestroy, g.graph)
	g.unpin()
}

func (g *Graph) unpin() {
	for _, e := range g.pinned {
		e.pins--
	}
	g.pinned = nil
}

// captureCheck is called by every operation that cannot be recorded; it
// fails the capture instead of corrupting it.
func (d *Device) captureCheck(what string) bool {
	if !d.capturing {
		return true
	}
	if d.captureErr == nil {
		d.captureErr = fmt.Errorf("%w: %s during capture (run the work once before capturing so its host arrays are on the device)", ErrCapture, what)
	}
	return false
}
