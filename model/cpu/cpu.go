package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/internal/pool"
	"github.com/r1go/r1go/model"
)

// Float is the element type of a CPU device: float32 for real work, float64
// for the finite-difference gradient checks of the tests.
type Float interface{ ~float32 | ~float64 }

// cpuBuf is a CPU buffer: a plain slice.
type cpuBuf[F Float] []F

func (b cpuBuf[F]) Len() int                      { return len(b) }
func (b cpuBuf[F]) Slice(off, n int) model.Buffer { return b[off : off+n : off+n] }

// Device is the reference device: storage in F, reductions in float64,
// parallel over all cores. It is the oracle every GPU op is tested against.
type Device[F Float] struct {
	threads int
	freed   atomic.Int64            // values of large buffers freed since the last collection
	times   atomic.Pointer[OpTimes] // where timed operations add their wall time (TimeOps), or nil
	timing  atomic.Bool             // a timed operation is running
}

// New returns the float32 CPU device using every core.
func New() model.Device { return &Device[float32]{threads: runtime.GOMAXPROCS(0)} }

// NewThreads returns the float32 CPU device using n threads (n < 1: every
// core): an asynchronous rollout's, beside the trainer's. Its buffers are
// New's kind, so that models on the two copy weights between them.
func NewThreads(n int) model.Device {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Device[float32]{threads: n}
}

// NewFloat64 returns the float64 CPU device of the gradient checks.
func NewFloat64() *Device[float64] { return &Device[float64]{threads: runtime.GOMAXPROCS(0)} }

func (d *Device[F]) Name() string {
	var z F
	return fmt.Sprintf("cpu(%T, %d threads)", z, d.threads)
}

// buf unwraps a Buffer of this device; a foreign buffer is a programmer error.
func buf[F Float](b model.Buffer) []F {
	if b == nil {
		return nil
	}
	if e, ok := b.(engineLogits); ok { // float32 values, on the float32 device
		if s, ok := any([]float32(e)).([]F); ok {
			return s
		}
	}
	s, ok := b.(cpuBuf[F])
	if !ok {
		panic(fmt.Sprintf("cpu: buffer %T does not belong to this CPU device", b))
	}
	return s
}

func (d *Device[F]) Alloc(n int) model.Buffer {
	d.collectFreed(n)
	return cpuBuf[F](make([]F, n))
}

// Free notes a large buffer's length: the next large Alloc runs the
// collector first, so that the freed memory is reused instead of the heap
// growing (with a live heap of several GiB of weights, the collector would
// otherwise wait for as much garbage again). Buffers still referenced
// stay, as always; by the next Alloc the caller has dropped the freed one.
func (d *Device[F]) Free(b model.Buffer) {
	if b != nil && b.Len() >= freeCollectLen {
		d.freed.Add(int64(b.Len()))
	}
}

// freeCollectLen is the length from which Free and Alloc care (16 Mi
// values).
const freeCollectLen = 16 << 20

// collectFreed runs the collector before a large allocation when large
// buffers were freed since the last one.
func (d *Device[F]) collectFreed(n int) {
	if n >= freeCollectLen && d.freed.Swap(0) > 0 {
		runtime.GC()
	}
}

func (d *Device[F]) Sync() error { return nil }

func (d *Device[F]) Upload(dst model.Buffer, src []float32) {
	if h, ok := asBF16(dst); ok {
		if len(src) != len(h) {
			panic(fmt.Sprintf("cpu: Upload of %d values into a buffer of %d", len(src), len(h)))
		}
		for i, v := range src {
			h[i] = bf16.FromFloat32(v)
		}
		return
	}
	x := buf[F](dst)
	if len(src) != len(x) {
		panic(fmt.Sprintf("cpu: Upload of %d values into a buffer of %d", len(src), len(x)))
	}
	for i, v := range src {
		x[i] = F(v)
	}
}

func (d *Device[F]) Download(dst []float32, src model.Buffer) {
	if h, ok := asBF16(src); ok {
		if len(dst) != len(h) {
			panic(fmt.Sprintf("cpu: Download of a buffer of %d values into %d", len(h), len(dst)))
		}
		for i, v := range h {
			dst[i] = bf16.ToFloat32(v)
		}
		return
	}
	x := buf[F](src)
	if len(dst) != len(x) {
		panic(fmt.Sprintf("cpu: Download of a buffer of %d values into %d", len(x), len(dst)))
	}
	for i, v := range x {
		dst[i] = float32(v)
	}
}

func (d *Device[F]) Zero(b model.Buffer) {
	if h, ok := asBF16(b); ok {
		clear(h)
		return
	}
	clear(buf[F](b))
}

// Copy copies between buffers of the same length; into or out of a bf16
// buffer it narrows (round to nearest even) or widens, and into a matrix
// in the tile layout it packs values in rows (packMatrix).
func (d *Device[F]) Copy(dst, src model.Buffer) {
	if t, ok := dst.(bf16TileBuf); ok {
		d.packMatrix(t, src)
		return
	}
	defer d.timed(opCopy)()
	hd, dok := asBF16(dst)
	hs, sok := asBF16(src)
	switch {
	case dok && sok:
		if len(hd) != len(hs) {
			panic(fmt.Sprintf("cpu: Copy of %d values into %d", len(hs), len(hd)))
		}
		copy(hd, hs)
		return
	case dok:
		x := buf[F](src)
		if len(hd) != len(x) {
			panic(fmt.Sprintf("cpu: Copy of %d values into %d", len(x), len(hd)))
		}
		d.parallel(len(x), 1<<16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				hd[i] = bf16.FromFloat32(float32(x[i]))
			}
		})
		return
	case sok:
		x := buf[F](dst)
		if len(hs) != len(x) {
			panic(fmt.Sprintf("cpu: Copy of %d values into %d", len(hs), len(x)))
		}
		for i, h := range hs {
			x[i] = F(bf16.ToFloat32(h))
		}
		return
	}
	x, y := buf[F](dst), buf[F](src)
	if len(x) != len(y) {
		panic(fmt.Sprintf("cpu: Copy of %d values into %d", len(y), len(x)))
	}
	copy(x, y)
}

func (d *Device[F]) Add(out, a, b model.Buffer) {
	defer d.timed(opAdd)()
	o, x, y := buf[F](out), buf[F](a), buf[F](b)
	if len(x) != len(o) || len(y) != len(o) {
		panic("cpu: Add of buffers with different lengths")
	}
	// A part of at least 64 Ki values: a decode step's residual add (32 ×
	// 896) runs on one thread, in under the time a parallel loop takes
	// to start and join (BenchmarkDecodeHostOps).
	d.parallel(len(o), 1<<16, func(lo, hi int) { addRow(o[lo:hi], x[lo:hi], y[lo:hi]) })
}

// addRow sets o[i] = x[i] + y[i], sixteen lanes at a time where the CPU
// can (the same bits); o may be x or y.
func addRow[F Float](o, x, y []F) {
	x, y = x[:len(o)], y[:len(o)] // one length: no bounds checks below
	done := 0
	if o32, ok := any(o).([]float32); ok && addVector && !addNoVector {
		if done = len(o) &^ 63; done > 0 {
			addAVX512(&o32[0], &any(x).([]float32)[0], &any(y).([]float32)[0], done)
		}
	}
	for i := done; i < len(o); i++ {
		o[i] = x[i] + y[i]
	}
}

// addNoVector turns the vector add off (tests).
var addNoVector bool

func (d *Device[F]) AddBias(out model.Buffer, ldo int, bias model.Buffer, rows, cols int) {
	defer d.timed(opAddBias)()
	o := buf[F](out)
	b, bp := vec[F](bias)
	defer putVec(bp)
	d.parallel(rows, 1+(1<<16)/max(cols, 1), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := o[r*ldo : r*ldo+cols]
			addRow(row, row, b)
		}
	})
}

func (d *Device[F]) BiasBackward(dbias model.Buffer, dout model.Buffer, ldo int, rows, cols int) {
	db, g := buf[F](dbias), buf[F](dout)
	d.parallel(cols, 64, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var s float64
			for r := 0; r < rows; r++ {
				s += float64(g[r*ldo+c])
			}
			db[c] += F(s)
		}
	})
}

func (d *Device[F]) SumSquares(x model.Buffer) float64 {
	v := buf[F](x)
	parts := make([]float64, d.threads)
	chunk := (len(v) + d.threads - 1) / d.threads
	pool.For(d.threads, d.threads, func(t int) {
		var s float64
		for _, e := range v[min(t*chunk, len(v)):min((t+1)*chunk, len(v))] {
			s += float64(e) * float64(e)
		}
		parts[t] = s
	})
	var s float64
	for _, p := range parts {
		s += p
	}
	return s
}

// AdamW is the decoupled-weight-decay Adam step (Loshchilov & Hutter):
// p ← p − lr·(m̂/(√v̂+eps) + wd·p), with bias-corrected moments.
func (d *Device[F]) AdamW(p, g, m, v model.Buffer, hp model.AdamWParams) {
	if hm, ok := asBF16(m); ok {
		vm, _ := asBF16(v)
		d.adamWBF16(buf[F](p), buf[F](g), hm, vm, hp)
		return
	}
	P, G, M, V := buf[F](p), buf[F](g), buf[F](m), buf[F](v)
	if len(G) != len(P) || len(M) != len(P) || len(V) != len(P) {
		panic("cpu: AdamW buffers of different lengths")
	}
	b1, b2 := float64(hp.Beta1), float64(hp.Beta2)
	c1 := 1 - math.Pow(b1, float64(hp.Step))
	c2 := 1 - math.Pow(b2, float64(hp.Step))
	lr, eps, wd, gs := float64(hp.LR), float64(hp.Eps), float64(hp.WeightDecay), float64(hp.GradScale)
	d.parallel(len(P), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := float64(G[i]) * gs
			mi := b1*float64(M[i]) + (1-b1)*gi
			vi := b2*float64(V[i]) + (1-b2)*gi*gi
			M[i], V[i] = F(mi), F(vi)
			pi := float64(P[i])
			P[i] = F(pi - lr*((mi/c1)/(math.Sqrt(vi/c2)+eps)+wd*pi))
		}
	})
}

// dynamic runs fn(i) for i in [0, n) on d.threads workers that pull
// indices one at a time (for tasks of unequal cost); each worker has its
// own scratch slice.
func (d *Device[F]) dynamic(n int, fn func(i int, scratch *[]F)) {
	workers := min(d.threads, n)
	scratch := make([][]F, workers)
	pool.ForWorker(workers, n, func(w, i int) { fn(i, &scratch[w]) })
}

// parallel splits [0, n) into at most d.threads contiguous ranges of at
// least grain items and runs fn on each, returning when all are done.
func (d *Device[F]) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(d.threads, (n+grain-1)/max(grain, 1))
	if parts <= 1 {
		fn(0, n)
		return
	}
	chunk := (n + parts - 1) / parts
	pool.For(parts, (n+chunk-1)/chunk, func(p int) { fn(p*chunk, min((p+1)*chunk, n)) })
}

// The capabilities the CPU device has (device.go lists them all).
var (
	_ model.Storage      = (*Device[float32])(nil)
	_ model.BF16Products = (*Device[float32])(nil)
	_ model.HostMemory   = (*Device[float32])(nil)
	_ model.Sampler      = (*Device[float32])(nil)
	_ model.Pager        = (*Device[float32])(nil)
)
