package rl

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// Data parallel: every rank holds the whole policy and draws the same
// global prompt batch from the same sampler; it rolls out its contiguous
// share of the prompts (whole GRPO groups), scores them, and then
//
//   - the packed batches are gathered into the global batch (per-token
//     rewards, masks, log-probs: a few MB), on which the estimator, the KL
//     penalty, the loss normaliser and every data metric run exactly as in
//     one process, so advantages are the single-process values bit for bit;
//   - each global mini-batch is updated from the ranks' parts of it, and
//     the gradient arena is summed over the ranks in fp32 buckets (or
//     reduce-scattered with ZeRO-1) before one identical optimizer step.
//
// Sharding the global batch rather than the data set keeps the sampler's
// epochs (no prompt twice) and makes the checkpoint independent of the
// world size: any number of ranks resumes from it.

// DPConfig configures data-parallel training (the dp.* keys).
type DPConfig struct {
	// Zero is the ZeRO stage: 0 all-reduces the gradients, 1 shards the
	// optimizer state, 2 also the gradients (dp_zero2.go). Zero1 is the
	// older switch for stage 1 and still works.
	Zero     int     `yaml:"zero" help:"ZeRO stage: 0 all-reduce, 1 shard the optimizer state, 2 also shard the gradients (reduce-scattered while the backward runs)"`
	Zero1    bool    `yaml:"zero1" help:"ZeRO-1: shard the optimizer state over the ranks (the same as dp.zero=1)"`
	BucketMB float64 `yaml:"bucket_mb" help:"gradient all-reduce bucket, MB of fp32"`
	// HeartbeatS bounds how long a rank waits for a silent peer before the
	// run stops with an error naming it.
	HeartbeatS float64 `yaml:"heartbeat_timeout_s" help:"a rank silent this long stops the run with an error naming it"`
	// ShardMasters gives back, under ZeRO on the CUDA device, the fp32
	// master weights outside this rank's shard (dp_masters.go).
	ShardMasters bool `yaml:"shard_masters" help:"with dp.zero 1 or 2 on the CUDA device: keep only this rank's shard of the fp32 master weights (and the norms and biases); the bf16 compute copy is gathered whole"`
}

// DefaultDPConfig is 25 MB buckets (PyTorch DDP's default) and a 60 s
// heartbeat: a rank that dies is noticed at once (its connection closes);
// one that hangs within 1.5 heartbeat timeouts.
func DefaultDPConfig() DPConfig { return DPConfig{BucketMB: 25, HeartbeatS: 60} }

// Validate reports a setting that cannot work.
func (c *DPConfig) Validate() error {
	if c.Zero < 0 || c.Zero > 2 {
		return fmt.Errorf("rl: dp.zero %d is not a ZeRO stage: 0, 1 or 2", c.Zero)
	}
	if c.ShardMasters && c.Stage() == 0 {
		return errors.New("rl: dp.shard_masters needs dp.zero 1 or 2 (the masters are sharded with the optimizer state)")
	}
	if !(c.BucketMB > 0) || !(c.HeartbeatS > 0) {
		return fmt.Errorf("rl: dp.bucket_mb %v and dp.heartbeat_timeout_s %v must be > 0", c.BucketMB, c.HeartbeatS)
	}
	return nil
}

// Stage is the ZeRO stage in force: dp.zero, or 1 under dp.zero1.
func (c *DPConfig) Stage() int {
	if c.Zero1 && c.Zero < 1 {
		return 1
	}
	return c.Zero
}

// DP is a Trainer's data-parallel part; a nil *DP is a run of one process.
type DP struct {
	Comm model.Comm
	Cfg  DPConfig

	// The current step's shard: prompts [promptLo, promptHi) and sequences
	// [seqLo, seqHi) of the global batch of globalSeqs sequences.
	promptLo, promptHi   int
	seqLo, seqHi, global int
	zero                 map[*optim.AdamW]*zeroState
	masters              []*zeroState // those whose masters are sharded, in the order ShardMasters saw them

	// MeasureGrads has ZeRO-2 optimizers built after it is set count the
	// resident bytes of their gradient arena (ZeroTwoStats), for tests
	// and benchmarks.
	MeasureGrads bool
}

// NewDP returns the data-parallel part for comm.
func NewDP(comm model.Comm, cfg DPConfig) (*DP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DP{Comm: comm, Cfg: cfg, zero: map[*optim.AdamW]*zeroState{}}, nil
}

// Rank0 says whether this process writes the run folder.
func (d *DP) Rank0() bool { return d == nil || d.Comm.Rank() == 0 }

// Shard returns this rank's contiguous share of the global prompt batch,
// n samples each; ranks differ by at most one prompt.
func (d *DP) Shard(prompts []data.Sample, n int) []data.Sample {
	r, w := d.Comm.Rank(), d.Comm.Size()
	d.promptLo, d.promptHi = r*len(prompts)/w, (r+1)*len(prompts)/w
	d.seqLo, d.seqHi, d.global = d.promptLo*n, d.promptHi*n, len(prompts)*n
	return prompts[d.promptLo:d.promptHi]
}

// StreamBase is the sampling stream of this rank's first trajectory: the
// single-process rollout gives trajectory i stream i.
func (d *DP) StreamBase() uint64 { return uint64(d.seqLo) }

// GlobalSeqs is the number of sequences of the global batch.
func (d *DP) GlobalSeqs() int { return d.global }

// wireBatch is a rank's batch on the wire, with its first group id.
type wireBatch struct {
	B         Batch
	GroupBase int
}

// GatherBatch returns the global batch: every rank's batch in rank order,
// group ids made global. The sequences of this rank are [seqLo, seqHi).
func (d *DP) GatherBatch(local *Batch) (*Batch, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(wireBatch{B: *local, GroupBase: d.promptLo}); err != nil {
		return nil, fmt.Errorf("rl: dp: encoding the batch: %w", err)
	}
	raw, err := model.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, err
	}
	parts := make([]*Batch, len(raw))
	for r, p := range raw {
		var w wireBatch
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&w); err != nil {
			return nil, fmt.Errorf("rl: dp: the batch of rank %d: %w", r, err)
		}
		for i := range w.B.Group {
			w.B.Group[i] += w.GroupBase
		}
		parts[r] = &w.B
	}
	g := concatBatches(parts)
	if g.NumSeqs() != d.global {
		return nil, fmt.Errorf("rl: dp: the ranks' batches hold %d sequences, the global batch %d", g.NumSeqs(), d.global)
	}
	return g, nil
}

// concatBatches packs parts back to back; a field is nil when it is nil
// in every part that has sequences.
func concatBatches(parts []*Batch) *Batch {
	g := &Batch{Offsets: []int{0}}
	var have []*Batch
	for _, p := range parts {
		if p.NumSeqs() > 0 {
			have = append(have, p)
		}
	}
	present := func(f func(*Batch) bool) bool {
		for _, p := range have {
			if f(p) {
				return true
			}
		}
		return false
	}
	ints := func(get func(*Batch) []int) []int {
		if !present(func(p *Batch) bool { return get(p) != nil }) {
			return nil
		}
		var out []int
		for _, p := range have {
			out = append(out, get(p)...)
		}
		return out
	}
	bools := func(get func(*Batch) []bool) []bool {
		if !present(func(p *Batch) bool { return get(p) != nil }) {
			return nil
		}
		var out []bool
		for _, p := range have {
			out = append(out, get(p)...)
		}
		return out
	}
	floats := func(get func(*Batch) []float64) []float64 {
		if !present(func(p *Batch) bool { return get(p) != nil }) {
			return nil
		}
		var out []float64
		for _, p := range have {
			out = append(out, get(p)...)
		}
		return out
	}
	for _, p := range have {
		base := g.NumTokens()
		for _, o := range p.Offsets[1:] {
			g.Offsets = append(g.Offsets, base+o)
		}
		g.Tokens = append(g.Tokens, p.Tokens...)
	}
	g.PromptLen = ints(func(p *Batch) []int { return p.PromptLen })
	g.Group = ints(func(p *Batch) []int { return p.Group })
	g.ActionMask = bools(func(p *Batch) []bool { return p.ActionMask })
	g.AdvantageMask = bools(func(p *Batch) []bool { return p.AdvantageMask })
	for _, f := range []struct {
		dst *[]float64
		get func(*Batch) []float64
	}{
		{&g.Scores, func(p *Batch) []float64 { return p.Scores }},
		{&g.Rewards, func(p *Batch) []float64 { return p.Rewards }},
		{&g.SampleLogProb, func(p *Batch) []float64 { return p.SampleLogProb }},
		{&g.OldLogProb, func(p *Batch) []float64 { return p.OldLogProb }},
		{&g.RefLogProb, func(p *Batch) []float64 { return p.RefLogProb }},
		{&g.OldValues, func(p *Batch) []float64 { return p.OldValues }},
		{&g.Advantages, func(p *Batch) []float64 { return p.Advantages }},
		{&g.Returns, func(p *Batch) []float64 { return p.Returns }},
		{&g.BaselineScore, func(p *Batch) []float64 { return p.BaselineScore }},
	} {
		*f.dst = floats(f.get)
	}
	return g
}

// Own returns this rank's sequences of the global mini-batch [lo, hi) of
// the global batch g, as a slice of mini = g.Slice(lo, hi).
func (d *DP) Own(mini *Batch, lo, hi int) *Batch {
	a, b := max(lo, d.seqLo), min(hi, d.seqHi)
	if b < a {
		a, b = lo, lo
	}
	return mini.Slice(a-lo, b-lo)
}

// ReduceMetrics combines a mini-batch's metrics over the ranks: the
// loss-valued ones (sumMetrics) add up, the rest are averaged over every
// rank's micro-batches, as one process averages over its own.
func (d *DP) ReduceMetrics(m Metrics, micro int) (Metrics, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct {
		M Metrics
		N int
	}{m, micro}); err != nil {
		return nil, err
	}
	raw, err := model.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, err
	}
	out, n := Metrics{}, 0
	for r, p := range raw {
		var w struct {
			M Metrics
			N int
		}
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&w); err != nil {
			return nil, fmt.Errorf("rl: dp: the metrics of rank %d: %w", r, err)
		}
		n += w.N
		for k, v := range w.M {
			if sumMetrics[k] {
				out[k] += v
			} else {
				out[k] += v * float64(w.N)
			}
		}
	}
	for k := range out {
		if !sumMetrics[k] && n > 0 {
			out[k] /= float64(n)
		}
	}
	return out, nil
}

// trajSummary is what RolloutMetrics reads of a trajectory.
type trajSummary struct {
	Turns, ToolCalls int
	Finish           Finish
	Outcome          env.Outcome
}

// RolloutMetrics is RolloutMetrics over every rank's trajectories.
func (d *DP) RolloutMetrics(trajs []*Trajectory) (Metrics, error) {
	s := make([]trajSummary, len(trajs))
	for i, t := range trajs {
		s[i] = trajSummary{t.Turns, t.ToolCalls, t.Finish, t.Outcome}
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s); err != nil {
		return nil, err
	}
	raw, err := model.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, err
	}
	var all []*Trajectory
	for r, p := range raw {
		var part []trajSummary
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&part); err != nil {
			return nil, fmt.Errorf("rl: dp: the trajectories of rank %d: %w", r, err)
		}
		for _, t := range part {
			all = append(all, &Trajectory{Turns: t.Turns, ToolCalls: t.ToolCalls, Finish: t.Finish, Outcome: t.Outcome})
		}
	}
	return RolloutMetrics(all), nil
}

// bucket is the all-reduce bucket in fp32 values.
func (d *DP) bucket() int { return max(1, int(d.Cfg.BucketMB*(1<<20)/4)) }

// Step sums the gradients of mdl over the ranks and steps opt, the same
// update on every rank; with ZeRO-1 and 2 each rank updates its shard.
func (d *DP) Step(mdl *model.Model, opt *optim.AdamW) (optim.StepResult, error) {
	if d.Cfg.Stage() > 0 {
		z, err := d.zeroOf(opt)
		if err != nil {
			return optim.StepResult{}, err
		}
		// ZeRO-2's callback sends collectives: it is hooked for one
		// mini-batch (ZeroGrads), never for a backward outside the update.
		// GradsNeed stays: it only maps given-back gradients before a
		// backward writes them.
		mdl.GradsDone = nil
		return z.step(d, mdl.Dev, opt)
	}
	if err := d.AllReduce(opt.Grads()); err != nil { // the adapters' in a LoRA run
		return optim.StepResult{}, err
	}
	return opt.Step(1), nil
}

// AllReduce sums g over the ranks in place, bucket by bucket (dp.bucket_mb).
func (d *DP) AllReduce(g model.Buffer) error {
	n, b := g.Len(), d.bucket()
	for off := 0; off < n; off += b {
		if err := d.Comm.AllReduce(g.Slice(off, min(b, n-off))); err != nil {
			return err
		}
	}
	return nil
}

// CheckInSync returns an error unless every rank holds the same weights
// in buf (a hash of its bits is compared).
func (d *DP) CheckInSync(dev model.Device, buf model.Buffer, what string) error {
	host := make([]float32, buf.Len())
	dev.Download(host, model.ReadableWeights(dev, buf)) // the compute copy where dp.shard_masters gave the fp32 back
	h := fnv.New64a()
	if len(host) > 0 {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)))
	}
	sum := h.Sum(nil)
	all, err := d.Comm.GatherBytes(sum)
	if err != nil {
		return err
	}
	for r := 1; r < d.Comm.Size(); r++ {
		if !bytes.Equal(all[r*8:(r+1)*8], all[:8]) {
			return fmt.Errorf("rl: dp: the %s of rank %d differ from rank 0's", what, r)
		}
	}
	return nil
}

// optStep is the trainer's optimizer step: opt's own in one process, the
// data-parallel one otherwise.
func (t *Trainer) optStep(mdl *model.Model, opt *optim.AdamW) (optim.StepResult, error) {
	if t.DP == nil {
		return opt.Step(1), nil
	}
	return t.DP.Step(mdl, opt)
}

// SaveOptimizer writes opt's state to path. In a data-parallel run every
// rank calls it (a collective) and rank 0 writes; ZeRO-1 shards are
// gathered into the unsharded file, so any world size resumes from it.
func (t *Trainer) SaveOptimizer(mdl *model.Model, opt *optim.AdamW, path string) error {
	d := t.DP
	if d == nil {
		return opt.Save(path)
	}
	if d.Cfg.Stage() == 0 {
		if d.Rank0() {
			return opt.Save(path)
		}
		return nil
	}
	z, err := d.zeroOf(opt)
	if err != nil {
		return err
	}
	return z.save(d, opt, path)
}

// LoadOptimizer restores what SaveOptimizer wrote (every rank reads it;
// a ZeRO-1 shard keeps its spans).
func (t *Trainer) LoadOptimizer(mdl *model.Model, opt *optim.AdamW, path string) error {
	return opt.Load(path)
}

// FollowCheckpoint is a rank other than 0's part of saving a checkpoint:
// the collectives of SaveOptimizer, in the order rank 0 runs them, and the
// check that the weights are still identical.
func (t *Trainer) FollowCheckpoint() error {
	if err := t.SaveOptimizer(t.Policy, t.ActorOpt, ""); err != nil {
		return err
	}
	if t.Critic != nil {
		if err := t.SaveOptimizer(t.Critic, t.CriticOpt, ""); err != nil {
			return err
		}
	}
	return t.CheckInSync()
}

// CheckInSync compares the policy (and critic) weights across the ranks;
// rank 0 calls it when it writes a checkpoint, the others in
// FollowCheckpoint.
func (t *Trainer) CheckInSync() error {
	if t.DP == nil {
		return nil
	}
	if err := t.DP.CheckInSync(t.Policy.Dev, t.Policy.Params, "policy weights"); err != nil {
		return err
	}
	if t.Critic != nil {
		return t.DP.CheckInSync(t.Critic.Dev, t.Critic.Params, "critic weights")
	}
	return nil
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
