package dp

import (
	"encoding/binary"
	"fmt"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// ZeRO-2 shards the gradients as well as the optimizer state. The bucket
// layout is ZeRO-1's (zero.go), but a bucket is reduce-scattered as
// soon as the backward has made it final, per micro-batch: the model calls
// back (model.Model.GradsDone) after each layer with the offset above
// which the arena's gradients are final, and every bucket wholly above it
// is sent, top of the arena first, in the same order on every rank. The
// rank's chunk of the sum is added into its packed fp32 gradient shard
// (copied on the mini-batch's first micro-batch) and the bucket's memory
// is given back (model.ReleaseGrads: zeroed and, on the CPU, its pages
// returned to the kernel; on the CUDA device its VMM chunks unmapped, and
// mapped again, zeroed, when the model says it is about to write them:
// Model.GradsNeed, model.MapGrads), so the next micro-batch finds it zero and a rank
// holds its shard, the buckets in flight and the gradients of the layer the
// backward is writing, never the whole arena. The trainer therefore does not
// clear the arena between mini-batches (zeroGrads).
//
// Overlap: where the communicator queues collectives on a stream of its
// own (model.AsyncComm: NCCL's second stream, cuda/nccl_stream.go), each
// bucket is queued there behind the backward's kernels so far, and its
// completion is waited for by the device's stream, not the host.
// Otherwise (MPI) the reduce-scatters run on one goroutine of their own, in
// launch order, while the backward goes on computing the layers below; the MPI
// calls themselves are blocking (MPI_Reduce_scatter_block on the
// communicator's locked OS thread), which with Open MPI's funneled
// threading gives the overlap that MPI_Ireduce_scatter would without
// a progress thread to drive it. At most inflight buckets are out at once,
// each with its own receive chunk; the next launch waits for the oldest.
// Every bucket of a Backward is back before it returns (the callback at
// offset 0), so no other collective can interleave with them.
//
// The sum differs from ZeRO-1's only by the order of the float32 additions
// across micro-batches (Σ_j reduce(g_j) rather than reduce(Σ_j g_j)): with
// one micro-batch per rank and mini-batch the steps are ZeRO-1's bit for bit.
// Every rank must send every bucket equally often, so before a mini-batch
// the ranks agree on the most micro-batches any of them runs, and a rank
// with fewer sends rounds of its zero arena (zeroRounds, zeroIdle).

// zeroInflight is how many buckets may be in flight at once.
const zeroInflight = optim.ShardsInFlight

// zeroTwo is a ZeRO-2 optimizer's gradient side.
type zeroTwo struct {
	dev   model.Device
	z     *zeroState
	shard model.Buffer // [own] this rank's summed gradients, packed in span order
	bkts  []zeroBucketRef
	next  int            // bkts[:next] are yet to be sent this Backward (sent from the top down)
	ring  []model.Buffer // [inflight][chunk] receive chunks
	queue []*zeroJob     // in flight, oldest first
	jobs  chan *zeroJob
	async model.AsyncComm // the communicator's own queue (NCCL's second stream), or nil: the goroutine
	sent  bool            // a bucket was sent since the last step
	idle  bool            // the round being sent has no backward (zeroIdle, step)
	err   error           // the first failed reduce-scatter, reported at the step

	// Launched counts buckets sent; Overlapped those sent before the
	// backward's last callback (while layers were still being computed).
	Launched, Overlapped int
	// PeakResident is the most bytes of the gradient arena found resident
	// (CPU only, -1 unknown or not measured): what ZeRO-2 holds. measure
	// turns the count on (DP.MeasureGrads; mincore reads a byte per page).
	PeakResident int64
	measure      bool
}

// zeroBucketRef is one bucket: its arena offset and length, its chunk,
// and where this rank's chunk of it sits in the packed shard.
type zeroBucketRef struct {
	off, L, c int
	lo, hi    int // this rank's chunk [lo, hi) of the arena
	k         int // its offset in the shard
	fresh     bool
}

// zeroJob is a bucket's reduce-scatter on the communication goroutine
// (done), or queued on an AsyncComm's own stream (wait).
type zeroJob struct {
	b         *zeroBucketRef
	src, recv model.Buffer
	done      chan error
	wait      func() error
}

func newZeroTwo(d *DP, dev model.Device, z *zeroState, own int) *zeroTwo {
	t := &zeroTwo{dev: dev, z: z, measure: d.MeasureGrads, shard: dev.Alloc(max(own, 1)).Slice(0, own), jobs: make(chan *zeroJob, zeroInflight), PeakResident: -1}
	r, k := d.Comm.Rank(), 0
	z.buckets(func(off, L, c int) error {
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		hi = max(hi, lo)
		t.bkts = append(t.bkts, zeroBucketRef{off: off, L: L, c: c, lo: lo, hi: hi, k: k, fresh: true})
		k += hi - lo
		return nil
	})
	for range zeroInflight {
		t.ring = append(t.ring, dev.Alloc(z.b))
	}
	z.recv = t.ring[0] // the all-gather's, after every bucket is back
	t.next = len(t.bkts)
	// The arena is zero and stays so between Backwards: give its pages back.
	model.ReleaseGrads(dev, z.grads)
	if ac, ok := d.Comm.(model.AsyncComm); ok {
		t.async = ac
		return t
	}
	go func() {
		for j := range t.jobs {
			j.done <- d.Comm.ReduceScatter(j.recv, j.src)
		}
	}()
	return t
}

// ready is the model's callback: gradients [lo, n) are final. The arena's
// residency only grows between two callbacks (the backward writes) and
// only shrinks inside one (buckets given back), so its peak is measured
// on entry.
func (t *zeroTwo) ready(lo int) {
	if t.measure {
		if n, ok := model.GradsResident(t.dev, t.z.grads); ok {
			t.PeakResident = max(t.PeakResident, n)
		}
	}
	for t.next > 0 && t.bkts[t.next-1].off >= lo {
		t.next--
		t.launch(&t.bkts[t.next], lo > 0)
	}
	if lo == 0 {
		for len(t.queue) > 0 {
			t.complete()
		}
		t.next = len(t.bkts)
	}
}

// need is the model's other callback: the backward is about to write the
// gradients [lo, hi), given back after the last Backward; on a device that
// unmapped them (CUDA's VMM arenas) they are mapped again, zeroed.
func (t *zeroTwo) need(lo, hi int) { model.MapGrads(t.dev, t.z.grads.Slice(lo, hi-lo)) }

// launch sends bucket b; during says the backward is still running.
func (t *zeroTwo) launch(b *zeroBucketRef, during bool) {
	if len(t.queue) == zeroInflight {
		t.complete()
	}
	src := t.z.grads.Slice(b.off, b.L)
	if !during && t.idle {
		// A round without a backward (zeroIdle) reads the given-back arena.
		model.MapGrads(t.dev, src)
	}
	if b.L != t.z.size*b.c { // the padded last bucket
		src = t.z.pad.Slice(0, t.z.size*b.c)
		t.dev.Zero(src)
		t.dev.Copy(t.z.pad.Slice(0, b.L), t.z.grads.Slice(b.off, b.L))
	}
	j := &zeroJob{b: b, src: src, recv: t.ring[t.Launched%zeroInflight].Slice(0, b.c), done: make(chan error, 1)}
	t.queue = append(t.queue, j)
	if t.async != nil {
		var err error
		if j.wait, err = t.async.ReduceScatterAsync(j.recv, j.src); err != nil {
			j.wait = func() error { return err }
		}
	} else {
		t.jobs <- j
	}
	t.Launched++
	if during {
		t.Overlapped++
	}
	t.sent = true
}

// complete waits for the oldest bucket in flight, adds this rank's chunk
// into the shard and gives the bucket's memory back.
func (t *zeroTwo) complete() {
	j := t.queue[0]
	t.queue = t.queue[1:]
	var err error
	if j.wait != nil {
		err = j.wait()
	} else {
		err = <-j.done
	}
	if err != nil {
		if t.err == nil {
			t.err = err
		}
		return
	}
	b := j.b
	if n := b.hi - b.lo; n > 0 {
		dst, got := t.shard.Slice(b.k, n), j.recv.Slice(0, n)
		if b.fresh {
			t.dev.Copy(dst, got)
		} else {
			t.dev.Add(dst, dst, got)
		}
	}
	b.fresh = false
	model.ReleaseGrads(t.dev, t.z.grads.Slice(b.off, b.L))
}

// step reduce-scatters what the backward did not send (an adapter arena,
// which has no callback), steps the shard with the global norm and
// all-gathers the parameters, as ZeRO-1 does.
func (t *zeroTwo) step(d *DP, dev model.Device, opt *optim.AdamW) (optim.StepResult, error) {
	if !t.sent {
		t.idle = true
		t.ready(0)
		t.idle = false
	}
	t.sent = false
	for i := range t.bkts {
		t.bkts[i].fresh = true
	}
	if err := t.err; err != nil {
		t.err = nil
		return optim.StepResult{}, fmt.Errorf("dp: dp.zero 2: a gradient bucket's reduce-scatter: %w", err)
	}
	return t.z.update(d, dev, opt)
}

// ZeroGrads clears mdl's gradients before a mini-batch. Under ZeRO-2 the
// arena is already zero (every bucket was given back after its
// reduce-scatter) and clearing it would bring all its memory back, so it
// only hooks the model's backward to opt's buckets. On a nil DP it is
// mdl.ZeroGrads.
func (d *DP) ZeroGrads(mdl *model.Model, opt *optim.AdamW) {
	if d != nil && d.Cfg.Stage() == 2 {
		if z := d.zero[opt]; z != nil && z.two != nil && mdl.Adapters() == nil {
			mdl.GradsDone, mdl.GradsNeed = z.two.ready, z.two.need
			return
		}
	}
	mdl.ZeroGrads()
}

// ZeroTwoStats reports, for opt of a ZeRO-2 run, the buckets sent, those
// sent while the backward was running, and the peak resident bytes of the
// gradient arena (-1 where unknown); ok is false for another optimizer.
func (d *DP) ZeroTwoStats(opt *optim.AdamW) (launched, overlapped int, peak int64, ok bool) {
	if d == nil || d.zero[opt] == nil || d.zero[opt].two == nil {
		return 0, 0, 0, false
	}
	t := d.zero[opt].two
	return t.Launched, t.Overlapped, t.PeakResident, true
}

// IdleRounds returns how many micro-batches this rank, with mine, runs
// fewer than the busiest rank in a ZeRO-2 mini-batch: every rank must send
// the same buckets the same number of times, so the ranks agree on the
// count first and a rank short of it sends zeros (Idle). It is 0 at
// other stages, where one reduction follows all the micro-batches.
func (d *DP) IdleRounds(mdl *model.Model, opt *optim.AdamW, mine int) (int, error) {
	if mdl.GradsDone == nil {
		return 0, nil
	}
	if z := d.zero[opt]; z == nil || z.two == nil {
		return 0, nil
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(mine))
	all, err := d.Comm.GatherBytes(b[:])
	if err != nil {
		return 0, err
	}
	most := 0
	for r := 0; r < d.Comm.Size(); r++ {
		most = max(most, int(binary.LittleEndian.Uint64(all[8*r:])))
	}
	return most - mine, nil
}

// Idle sends n rounds of the zero arena's buckets (their sums still need
// this rank's part).
func (d *DP) Idle(opt *optim.AdamW, n int) {
	if n == 0 {
		return
	}
	two := d.zero[opt].two
	two.idle = true
	for range n {
		two.ready(0)
	}
	two.idle = false
}
