package cuda

import (
	"errors"
	"testing"
)

// TestGPUGraph records a residual add and an RMSNorm, replays the graph
// three times, and compares with the CPU running the same ops three times.
// Work that uploads host data fails the capture with ErrCapture and leaves
// the device usable.
func TestGPUGraph(t *testing.T) {
	e := newOpEnv(t)
	rows, C := 33, 256
	ca, ga := e.pair(e.randn(rows*C, 1))
	cb, gb := e.pair(e.randn(rows*C, 1))
	cw, gw := e.pair(e.randn(C, 1))
	co, gout := e.pair(make([]float32, rows*C))
	cr, gr := e.pair(make([]float32, rows))
	ids := []int32{3, 1, 4, 1, 5}
	ce, ge := e.pair(make([]float32, len(ids)*C))
	e.gpu.Embedding(ge, ids, ga, C) // puts ids on the device before the capture
	g, err := e.gpu.Capture(func() {
		e.gpu.Add(ga, ga, gb)
		e.gpu.RMSNorm(gout, nil, gr, ga, nil, gw, rows, C, 1e-6)
		e.gpu.Embedding(ge, ids, ga, C)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	for range 3 {
		g.Launch()
		e.cpu.Add(ca, ca, cb)
		e.cpu.RMSNorm(co, nil, cr, ca, nil, cw, rows, C, 1e-6)
		e.cpu.Embedding(ce, ids, ca, C)
	}
	e.check("graph: residual", ca, ga, 0)
	e.check("graph: RMSNorm", co, gout, 1e-5)
	e.check("graph: embedding", ce, ge, 0)

	_, err = e.gpu.Capture(func() { e.gpu.Embedding(ge, []int32{9, 9, 9}, ga, C) })
	if !errors.Is(err, ErrCapture) {
		t.Fatalf("capturing an upload: error %v, want ErrCapture", err)
	}
	e.gpu.Embedding(ge, []int32{9, 9, 9, 2, 7}, ga, C)
	e.cpu.Embedding(ce, []int32{9, 9, 9, 2, 7}, ca, C)
	e.check("after a failed capture", ce, ge, 0)
}
