package rl

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/safetensors"
	"github.com/r1go/r1go/optim"
)

// ZeRO-1 shards the AdamW moments: the parameter arena is cut into buckets
// of Size·B values (B the all-reduce bucket), each bucket into Size equal
// chunks, and rank r owns chunk r of every bucket (the last bucket is
// padded to a multiple of Size). A step reduce-scatters each bucket's
// gradients, updates the owned chunks with the optimizer's own
// hyperparameters, schedule and clipping (the global norm is a sum of the
// ranks' partial sums), and all-gathers the parameters. Each rank keeps
// 2/Size of the moments plus one bucket of scratch.

type zeroSeg struct{ param, shard, n int } // arena offset, shard offset, length

type zeroState struct {
	n, b, size int
	segs       []zeroSeg
	own        int          // values owned
	g, m, v    model.Buffer // [own] reduced gradients and moments of the owned chunks
	pad, recv  model.Buffer // [size·chunk], [chunk] scratch of the padded last bucket
	steps      int
}

// zeroLayout is rank r's segments of an arena of n values, buckets of
// size·b.
func zeroLayout(n, b, size, r int) (segs []zeroSeg, own int) {
	for off := 0; off < n; off += size * b {
		L := min(size*b, n-off)
		c := (L + size - 1) / size
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			segs = append(segs, zeroSeg{param: lo, shard: own, n: hi - lo})
			own += hi - lo
		}
	}
	return segs, own
}

func (d *DP) zeroFor(mdl *model.Model, opt *optim.AdamW) *zeroState {
	if z := d.zero[opt]; z != nil {
		return z
	}
	n, size := mdl.Params.Len(), d.Comm.Size()
	b := min(d.bucket(), (n+size-1)/size)
	z := &zeroState{n: n, b: b, size: size}
	z.segs, z.own = zeroLayout(n, b, size, d.Comm.Rank())
	dev := mdl.Dev
	z.g, z.m, z.v = dev.Alloc(max(z.own, 1)), dev.Alloc(max(z.own, 1)), dev.Alloc(max(z.own, 1))
	z.pad, z.recv = dev.Alloc(size*b), dev.Alloc(b)
	d.zero[opt] = z
	return z
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

func (z *zeroState) step(d *DP, mdl *model.Model, opt *optim.AdamW) (optim.StepResult, error) {
	dev, r := mdl.Dev, d.Comm.Rank()
	k := 0 // next shard offset
	err := z.buckets(func(off, L, c int) error {
		src := mdl.Grads.Slice(off, L)
		if L != z.size*c {
			src = z.pad.Slice(0, z.size*c)
			dev.Zero(src)
			dev.Copy(z.pad.Slice(0, L), mdl.Grads.Slice(off, L))
		}
		if err := d.Comm.ReduceScatter(z.recv.Slice(0, c), src); err != nil {
			return err
		}
		if n := min(off+(r+1)*c, off+L) - (off + r*c); n > 0 {
			dev.Copy(z.g.Slice(k, n), z.recv.Slice(0, n))
			k += n
		}
		return nil
	})
	if err != nil {
		return optim.StepResult{}, err
	}
	var part float64
	if z.own > 0 {
		part = dev.SumSquares(z.g.Slice(0, z.own))
	}
	sum, err := model.SumFloat64s(d.Comm, []float64{part})
	if err != nil {
		return optim.StepResult{}, err
	}
	// As optim.AdamW.Step: the norm before clipping, a non-finite norm
	// skips the update on every rank alike.
	norm := math.Sqrt(sum[0])
	res := optim.StepResult{GradNorm: norm, LR: opt.LRAt(z.steps, opt.TotalSteps)}
	if !finite(norm) {
		res.Skipped = true
		return res, nil
	}
	scale := 1.0
	if opt.GradClip > 0 && norm > opt.GradClip {
		scale *= opt.GradClip / norm
	}
	z.steps++
	hp := model.AdamWParams{LR: float32(res.LR), Beta1: float32(opt.Beta1), Beta2: float32(opt.Beta2), Eps: float32(opt.Eps),
		WeightDecay: float32(opt.WeightDecay), Step: z.steps, GradScale: float32(scale)}
	for _, s := range z.segs {
		dev.AdamW(mdl.Params.Slice(s.param, s.n), z.g.Slice(s.shard, s.n), z.m.Slice(s.shard, s.n), z.v.Slice(s.shard, s.n), hp)
	}
	err = z.buckets(func(off, L, c int) error {
		lo, hi := off+r*c, min(off+(r+1)*c, off+L)
		if hi > lo {
			dev.Copy(z.recv.Slice(0, hi-lo), mdl.Params.Slice(lo, hi-lo))
		}
		if L == z.size*c {
			return d.Comm.AllGather(mdl.Params.Slice(off, L), z.recv.Slice(0, c))
		}
		if err := d.Comm.AllGather(z.pad.Slice(0, z.size*c), z.recv.Slice(0, c)); err != nil {
			return err
		}
		dev.Copy(mdl.Params.Slice(off, L), z.pad.Slice(0, L))
		return nil
	})
	return res, err
}

// save gathers the moments on rank 0 and writes them in optim.AdamW's
// format.
func (z *zeroState) save(d *DP, mdl *model.Model, path string) error {
	full := [2][]float32{}
	for i, buf := range []model.Buffer{z.m, z.v} {
		host := make([]float32, buf.Len())
		mdl.Dev.Download(host, buf)
		raw := make([]byte, 4*z.own)
		for j := 0; j < z.own; j++ {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(host[j]))
		}
		parts, err := model.GatherVar(d.Comm, raw)
		if err != nil {
			return err
		}
		if !d.Rank0() {
			continue
		}
		full[i] = make([]float32, z.n)
		for r, p := range parts {
			segs, own := zeroLayout(z.n, z.b, z.size, r)
			if len(p) != 4*own {
				return fmt.Errorf("rl: zero1: rank %d sent %d bytes of moments, want %d", r, len(p), 4*own)
			}
			for _, s := range segs {
				for j := 0; j < s.n; j++ {
					full[i][s.param+j] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*(s.shard+j):]))
				}
			}
		}
	}
	if !d.Rank0() {
		return nil
	}
	return safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "exp_avg", DType: safetensors.F32, Shape: []int{z.n}, F32: full[0]},
		{Name: "exp_avg_sq", DType: safetensors.F32, Shape: []int{z.n}, F32: full[1]},
	}, map[string]string{"step": strconv.Itoa(z.steps), "format": "r1go-adamw"})
}

// load reads an unsharded optimizer file and keeps this rank's chunks.
func (z *zeroState) load(mdl *model.Model, path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	step, err := strconv.Atoi(f.Metadata()["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("rl: zero1: %s: metadata step %q is not a step count", path, f.Metadata()["step"])
	}
	for _, t := range []struct {
		name string
		dst  model.Buffer
	}{{"exp_avg", z.m}, {"exp_avg_sq", z.v}} {
		info, ok := f.Info(t.name)
		if !ok {
			return fmt.Errorf("rl: zero1: %s: tensor %s is missing", path, t.name)
		}
		if int(info.NumElements()) != z.n {
			return fmt.Errorf("rl: zero1: %s: tensor %s has %d values, the model has %d parameters", path, t.name, info.NumElements(), z.n)
		}
		full := make([]float32, z.n)
		if err := f.ReadF32(t.name, full); err != nil {
			return err
		}
		own := make([]float32, t.dst.Len())
		for _, s := range z.segs {
			copy(own[s.shard:s.shard+s.n], full[s.param:s.param+s.n])
		}
		mdl.Dev.Upload(t.dst, own)
	}
	z.steps = step
	return nil
}
