package dp

import (
	"errors"
	"fmt"
	"sort"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// Sharded master weights (dp.shard_masters). In mixed precision the fp32
// weights a ZeRO rank does not update are read by nobody but the
// all-gather that refreshes the bf16 compute copy, and the compute copy
// is what every matmul and the embedding read: so on a device that can
// give memory back (model.Pager: CUDA's VMM arenas) and write the compute
// copy from other fp32 values (model.ComputeCopier), a rank keeps of the
// fp32 arena only its shard and the tensors the device reads in fp32 (the
// norm weights and biases, 1-D tensors), as DeepSpeed's ZeRO-1 keeps the
// masters with the moments. After each step every bucket is all-gathered
// into one bucket of scratch, its compute copy written from there
// (Copy into ComputeCopy's view, the same rounding as refreshing it from the gathered fp32
// arena) and the kept tensors copied back, so the weights the model
// computes with are the unsharded run's bit for bit.
//
// A checkpoint runs inside WithMasters, a collective that gathers the
// masters bucket by bucket onto rank 0's host for Save; the weights check
// and the scan for non-finite weights read the compute copy instead
// (model.ReadableWeights).

// masterState is a ZeRO optimizer's sharded masters.
type masterState struct {
	mdl   *model.Model
	cc    model.ComputeCopier
	pager model.Pager
	keep  []optim.Span // tensors the device reads in fp32
	held  []optim.Span // keep ∪ this rank's spans, sorted and merged
	full  model.Buffer // [size·b] a bucket gathered whole
	gone  bool         // the masters outside held are given back
}

// ShardMasters gives back the fp32 master weights of mdl outside this
// rank's shard of opt (dp.shard_masters); opt must come from NewOptimizer
// at ZeRO stage 1 or 2 over mdl's weights, and mdl's device must page and
// hold a compute copy of them (the CUDA device after UseBF16).
func (d *DP) ShardMasters(mdl *model.Model, opt *optim.AdamW) error {
	z, err := d.zeroOf(opt)
	if err != nil {
		return err
	}
	cc, ok1 := mdl.Dev.(model.ComputeCopier)
	pg, ok2 := mdl.Dev.(model.Pager)
	if !ok1 || !ok2 {
		return fmt.Errorf("dp: dp.shard_masters: the %T device cannot give memory back and keep a compute copy (the CUDA device in mixed precision can)", mdl.Dev)
	}
	if mdl.Adapters() != nil || z.n != mdl.Params.Len() {
		return errors.New("dp: dp.shard_masters: the optimizer does not update the model's weights (a LoRA run has no masters to shard)")
	}
	if _, ok := cc.ComputeCopy(mdl.Params); !ok {
		return errors.New("dp: dp.shard_masters: the weights have no bf16 compute copy (mixed precision is off)")
	}
	m := &masterState{mdl: mdl, cc: cc, pager: pg, full: mdl.Dev.Alloc(z.size * z.b)}
	off := 0
	for _, t := range mdl.Tensors() {
		n := 1
		for _, s := range t.Shape {
			n *= s
		}
		if len(t.Shape) == 1 {
			m.keep = append(m.keep, optim.Span{Off: off, N: n})
		}
		off += n
	}
	if off != z.n {
		return fmt.Errorf("dp: dp.shard_masters: the model's tensors hold %d values, its weights %d", off, z.n)
	}
	m.held = mergeSpans(append(append([]optim.Span(nil), m.keep...), z.spans...))
	z.masters = m
	d.masters = append(d.masters, z)
	m.release(z)
	return nil
}

// mergeSpans sorts spans and joins those that overlap or touch.
func mergeSpans(s []optim.Span) []optim.Span {
	sort.Slice(s, func(i, j int) bool { return s[i].Off < s[j].Off })
	var out []optim.Span
	for _, x := range s {
		if k := len(out) - 1; k >= 0 && x.Off <= out[k].Off+out[k].N {
			out[k].N = max(out[k].N, x.Off+x.N-out[k].Off)
			continue
		}
		out = append(out, x)
	}
	return out
}

// release gives back the masters outside held.
func (m *masterState) release(z *zeroState) {
	at := 0
	for _, h := range append(m.held, optim.Span{Off: z.n}) {
		if h.Off > at {
			m.pager.ReleasePages(z.params.Slice(at, h.Off-at))
		}
		at = max(at, h.Off+h.N)
	}
	m.gone = true
}

// gather is zeroState.gather with the masters given back: each bucket is
// all-gathered into full, the compute copy written from it and the kept
// tensors copied back.
func (m *masterState) gather(d *DP, dev model.Device, z *zeroState) error {
	r := d.Comm.Rank()
	k := 0 // the first kept span not wholly below the bucket
	return z.buckets(func(off, L, c int) error {
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			dev.Copy(z.recv.Slice(0, hi-lo), z.params.Slice(lo, hi-lo))
		}
		full := m.full.Slice(0, z.size*c)
		if err := d.Comm.AllGather(full, z.recv.Slice(0, c)); err != nil {
			return err
		}
		if c, ok := m.cc.ComputeCopy(z.params.Slice(off, L)); ok {
			dev.Copy(c, full.Slice(0, L)) // rounded into the bf16 compute copy
		}
		for ; k < len(m.keep) && m.keep[k].Off+m.keep[k].N <= off; k++ {
		}
		for j := k; j < len(m.keep) && m.keep[j].Off < off+L; j++ {
			a, b := max(m.keep[j].Off, off), min(m.keep[j].Off+m.keep[j].N, off+L)
			dev.Copy(z.params.Slice(a, b-a), full.Slice(a-off, b-a))
		}
		return nil
	})
}

// WithMasters runs f with the fp32 master weights of mdl, where they are
// sharded, gathered whole on rank 0's host as mdl.SaveFrom (which Save
// writes): every bucket is all-gathered through the bucket of scratch and
// downloaded, so the device holds nothing more than it does between
// steps. Every rank must call it at the same point; elsewhere, and on a
// nil DP, it is f().
func (d *DP) WithMasters(mdl *model.Model, f func() error) error {
	var z *zeroState
	if d != nil {
		for _, x := range d.masters {
			if x.masters.mdl == mdl {
				z = x
			}
		}
	}
	if z == nil {
		return f()
	}
	m, r := z.masters, d.Comm.Rank()
	var host []float32
	if r == 0 {
		host = make([]float32, z.n)
	}
	err := z.buckets(func(off, L, c int) error {
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			z.dev.Copy(z.recv.Slice(0, hi-lo), z.params.Slice(lo, hi-lo))
		}
		if err := d.Comm.AllGather(m.full.Slice(0, z.size*c), z.recv.Slice(0, c)); err != nil {
			return err
		}
		if host != nil {
			z.dev.Download(host[off:off+L], m.full.Slice(0, L))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dp: gathering the master weights: %w", err)
	}
	mdl.SaveFrom = host
	defer func() { mdl.SaveFrom = nil }()
	return f()
}
