package dp

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/optim"
)

// ZeRO-1 shards the AdamW moments: the parameter arena is cut as
// optim.ShardLayout says, into buckets of Size·B values (B the all-reduce
// bucket), each bucket into Size equal chunks, and rank r owns chunk r of
// every bucket (the last bucket is padded to a multiple of Size). The rank's optimizer is an optim.NewShard
// over its chunks, so only 1/Size of the moments is ever allocated. A step
// reduce-scatters each bucket's gradients and puts the rank's summed chunk
// back in its place in the gradient arena (the rest of the arena is then
// stale and unread), steps the shard with the global norm (the root of the
// ranks' summed partial sums), and all-gathers the parameters. Beside its
// moments a rank keeps one chunk of receive scratch and, when the last
// bucket is padded, one padded bucket. Checkpoints stay the unsharded optimizer file (optim's
// SaveShards and Load), so a run resumes on any number of ranks.

// zeroState is a sharded optimizer's data-parallel side.
type zeroState struct {
	n, b, size    int
	params, grads model.Buffer // the whole arenas
	spans         []optim.Span // this rank's chunks
	recv          model.Buffer // [chunk] the reduce-scatter's and all-gather's
	pad           model.Buffer // [size·last chunk] the padded last bucket; nil when none
	two           *zeroTwo     // ZeRO-2's gradient shard and buckets in flight; nil at stage 1
	masters       *masterState // dp.shard_masters: the fp32 masters outside the shard given back; nil otherwise
	dev           model.Device
}

// NewOptimizer returns the AdamW of params from grads: with dp.zero1 this
// rank's shard (optim.NewShard, 1/Size of the moments), otherwise, and in
// a run of one process (d nil), the whole arena's (optim.New).
func (d *DP) NewOptimizer(dev model.Device, params, grads model.Buffer, cfg optim.Config, totalSteps int) (*optim.AdamW, error) {
	if d == nil || d.Cfg.Stage() == 0 {
		return optim.New(dev, params, grads, cfg, totalSteps)
	}
	if params.Len() != grads.Len() {
		return nil, fmt.Errorf("dp: dp.zero %d: %d parameters but %d gradients", d.Cfg.Stage(), params.Len(), grads.Len())
	}
	n, size := params.Len(), d.Comm.Size()
	l := optim.NewShardLayout(n, d.bucket(), size)
	z := &zeroState{n: n, b: l.Bucket, size: size, params: params, grads: grads, dev: dev}
	var own int
	z.spans, own = l.Spans(d.Comm.Rank())
	var opt *optim.AdamW
	var err error
	if d.Cfg.Stage() == 2 {
		z.two = newZeroTwo(d, dev, z, own)
		opt, err = optim.NewShardPacked(dev, params, z.two.shard, z.spans, cfg, totalSteps)
	} else {
		opt, err = optim.NewShard(dev, params, grads, z.spans, cfg, totalSteps)
	}
	if err != nil {
		return nil, err
	}
	if z.two == nil {
		z.recv = dev.Alloc(z.b)
	}
	if p := l.Padded(); p > 0 {
		z.pad = dev.Alloc(p)
	}
	d.zero[opt] = z
	return opt, nil
}

// layout is the ZeRO layout z was built with.
func (z *zeroState) layout() optim.ShardLayout {
	return optim.ShardLayout{N: z.n, Bucket: z.b, Ranks: z.size}
}

// zeroOf returns opt's sharded state; opt must come from NewOptimizer.
func (d *DP) zeroOf(opt *optim.AdamW) (*zeroState, error) {
	if z := d.zero[opt]; z != nil {
		return z, nil
	}
	return nil, fmt.Errorf("dp: dp.zero %d: the optimizer was not built by DP.NewOptimizer (it holds the whole state)", d.Cfg.Stage())
}

// buckets calls f for every bucket: its offset, length and chunk.
func (z *zeroState) buckets(f func(off, L, c int) error) error {
	for off := 0; off < z.n; off += z.size * z.b {
		L := min(z.size*z.b, z.n-off)
		if err := f(off, L, (L+z.size-1)/z.size); err != nil {
			return err
		}
	}
	return nil
}

func (z *zeroState) step(d *DP, dev model.Device, opt *optim.AdamW) (optim.StepResult, error) {
	if z.two != nil {
		return z.two.step(d, dev, opt)
	}
	r := d.Comm.Rank()
	err := z.buckets(func(off, L, c int) error {
		src := z.grads.Slice(off, L)
		if L != z.size*c {
			src = z.pad.Slice(0, z.size*c)
			dev.Zero(src)
			dev.Copy(z.pad.Slice(0, L), z.grads.Slice(off, L))
		}
		// MPI forbids the destination inside the source: the chunk comes
		// back through recv.
		if err := d.Comm.ReduceScatter(z.recv.Slice(0, c), src); err != nil {
			return err
		}
		if lo, hi := off+r*c, min(off+(r+1)*c, off+L); hi > lo {
			dev.Copy(z.grads.Slice(lo, hi-lo), z.recv.Slice(0, hi-lo))
		}
		return nil
	})
	if err != nil {
		return optim.StepResult{}, err
	}
	return z.update(d, dev, opt)
}

// update steps the rank's shard, its gradients reduced, with the global
// gradient norm (the same update on every rank: a non-finite norm skips it
// on all), then gathers the parameters.
func (z *zeroState) update(d *DP, dev model.Device, opt *optim.AdamW) (optim.StepResult, error) {
	sum, err := comm.SumFloat64s(d.Comm, []float64{opt.GradSumSquares()})
	if err != nil {
		return optim.StepResult{}, err
	}
	res := opt.StepNorm(1, math.Sqrt(sum[0]))
	if res.Skipped {
		return res, nil
	}
	return res, z.gather(d, dev)
}

// gather all-gathers the updated parameters: every rank's chunks of every
// bucket, through the receive chunk (and the padded last bucket).
func (z *zeroState) gather(d *DP, dev model.Device) error {
	if z.masters != nil && z.masters.gone {
		return z.masters.gather(d, dev, z)
	}
	r := d.Comm.Rank()
	return z.buckets(func(off, L, c int) error {
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			dev.Copy(z.recv.Slice(0, hi-lo), z.params.Slice(lo, hi-lo))
		}
		if L == z.size*c {
			return d.Comm.AllGather(z.params.Slice(off, L), z.recv.Slice(0, c))
		}
		if err := d.Comm.AllGather(z.pad.Slice(0, z.size*c), z.recv.Slice(0, c)); err != nil {
			return err
		}
		dev.Copy(z.params.Slice(off, L), z.pad.Slice(0, L))
		return nil
	})
}

// save gathers the moments on rank 0, which writes the unsharded file.
func (z *zeroState) save(d *DP, opt *optim.AdamW, path string) error {
	own := opt.Shard()
	ms, err := comm.GatherVar(d.Comm, own.M)
	if err != nil {
		return err
	}
	vs, err := comm.GatherVar(d.Comm, own.V)
	if err != nil {
		return err
	}
	if !d.Rank0() {
		return nil
	}
	shards := make([]optim.Shard, z.size)
	for r := range shards {
		spans, _ := z.layout().Spans(r)
		shards[r] = optim.Shard{Spans: spans, DType: own.DType, M: ms[r], V: vs[r]}
	}
	return opt.SaveShards(path, shards)
}
