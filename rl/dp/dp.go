// Package dp is the trainer's data-parallel part over model.Comm: DP, the
// central type, implements rl.Sync for the ranks a launcher started
// (mpirun, srun, torchrun; cmd/train joins them), with ZeRO stages 1 and 2
// (zero.go, zero2.go) and sharded fp32 masters (masters.go) laid out as
// optim.ShardLayout says, and, for asynchronous training, ranks that only
// roll out (rollranks.go: RemoteRollout on the trainer ranks,
// ServeRollout on the rollout ranks). rl.Local is the one-process rl.Sync. Errors are
// returned and name the dp.* setting or the rank; a failed collective
// leaves the ranks out of step, and the run must stop.
package dp

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
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

// Config configures data-parallel training (the dp.* keys).
type Config struct {
	// Zero is the ZeRO stage: 0 all-reduces the gradients, 1 shards the
	// optimizer state, 2 also the gradients (zero2.go). Zero1 is the
	// older switch for stage 1 and still works.
	Zero     int     `yaml:"zero" help:"ZeRO stage: 0 all-reduce, 1 shard the optimizer state, 2 also shard the gradients (reduce-scattered while the backward runs)"`
	Zero1    bool    `yaml:"zero1" help:"ZeRO-1: shard the optimizer state over the ranks (the same as dp.zero=1)"`
	BucketMB float64 `yaml:"bucket_mb" help:"gradient all-reduce bucket, MB of fp32"`
	// HeartbeatS bounds how long a rank waits for a silent peer before the
	// run stops with an error naming it.
	HeartbeatS float64 `yaml:"heartbeat_timeout_s" help:"a rank silent this long stops the run with an error naming it"`
	// ShardMasters gives back, under ZeRO on the CUDA device, the fp32
	// master weights outside this rank's shard (masters.go).
	ShardMasters bool `yaml:"shard_masters" help:"with dp.zero 1 or 2 on the CUDA device: keep only this rank's shard of the fp32 master weights (and the norms and biases); the bf16 compute copy is gathered whole"`
	// RolloutRanks is how many of the ranks, the last ones, only roll out
	// (trainer.async; rollranks.go).
	RolloutRanks int `yaml:"rollout_ranks" help:"with trainer.async: the last N ranks only roll out, from the weights trainer rank 0 broadcasts after each update, and the others only train"`
}

// DefaultConfig is 25 MB buckets (PyTorch DDP's default) and a 60 s
// heartbeat: a rank that dies is noticed at once (its connection closes);
// one that hangs within 1.5 heartbeat timeouts.
func DefaultConfig() Config { return Config{BucketMB: 25, HeartbeatS: 60} }

// Validate reports a setting that cannot work.
func (c *Config) Validate() error {
	if c.Zero < 0 || c.Zero > 2 {
		return fmt.Errorf("dp: dp.zero %d is not a ZeRO stage: 0, 1 or 2", c.Zero)
	}
	if c.RolloutRanks < 0 {
		return fmt.Errorf("dp: dp.rollout_ranks %d is negative", c.RolloutRanks)
	}
	if c.RolloutRanks > 0 && c.ShardMasters {
		return errors.New("dp: dp.rollout_ranks with dp.shard_masters: trainer rank 0 broadcasts the whole float32 policy after each update, and no rank would hold it")
	}
	if c.ShardMasters && c.Stage() == 0 {
		return errors.New("dp: dp.shard_masters needs dp.zero 1 or 2 (the masters are sharded with the optimizer state)")
	}
	if !(c.BucketMB > 0) || !(c.HeartbeatS > 0) {
		return fmt.Errorf("dp: dp.bucket_mb %v and dp.heartbeat_timeout_s %v must be > 0", c.BucketMB, c.HeartbeatS)
	}
	return nil
}

// Stage is the ZeRO stage in force: dp.zero, or 1 under dp.zero1.
func (c *Config) Stage() int {
	if c.Zero1 && c.Zero < 1 {
		return 1
	}
	return c.Zero
}

// DP is a Trainer's data-parallel part; a nil *DP is a run of one process.
type DP struct {
	Comm model.Comm
	Cfg  Config

	zero    map[*optim.AdamW]*zeroState
	masters []*zeroState // those whose masters are sharded, in the order ShardMasters saw them

	// MeasureGrads has ZeRO-2 optimizers built after it is set count the
	// resident bytes of their gradient arena (ZeroTwoStats), for tests
	// and benchmarks.
	MeasureGrads bool
}

// New returns the data-parallel part for comm.
func New(comm model.Comm, cfg Config) (*DP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DP{Comm: comm, Cfg: cfg, zero: map[*optim.AdamW]*zeroState{}}, nil
}

// Rank0 says whether this process writes the run folder.
func (d *DP) Rank0() bool { return d == nil || d.Comm.Rank() == 0 }

// Shard returns this rank's contiguous share of the global prompt batch,
// n samples each; ranks differ by at most one prompt.
func (d *DP) Shard(prompts []data.Sample, n int) rl.Slice {
	r, w := d.Comm.Rank(), d.Comm.Size()
	lo, hi := r*len(prompts)/w, (r+1)*len(prompts)/w
	return rl.Slice{PromptLo: lo, PromptHi: hi, SeqLo: lo * n, SeqHi: hi * n, Global: len(prompts) * n}
}

// wireBatch is a rank's batch on the wire, with its first group id.
type wireBatch struct {
	B         rl.Batch
	GroupBase int
}

// GatherBatch returns the global batch: every rank's batch in rank order,
// group ids made global and, in step mode, trajectory ids too; and s with
// this rank's packed sequences of it and the global number of
// trajectories. A rank's batch may hold fewer trajectories than its
// shard (rollout.verify=drop) and, in step mode, several sequences each.
func (d *DP) GatherBatch(local *rl.Batch, s rl.Slice) (*rl.Batch, rl.Slice, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(wireBatch{B: *local, GroupBase: s.PromptLo}); err != nil {
		return nil, s, fmt.Errorf("dp: encoding the batch: %w", err)
	}
	raw, err := comm.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, s, err
	}
	parts := make([]*rl.Batch, len(raw))
	seqs, trajs := 0, 0
	for r, p := range raw {
		var w wireBatch
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&w); err != nil {
			return nil, s, fmt.Errorf("dp: the batch of rank %d: %w", r, err)
		}
		n, err := w.B.Trajectories()
		if err != nil {
			return nil, s, fmt.Errorf("dp: the batch of rank %d: %w", r, err)
		}
		// Step mode numbers a rank's trajectories from 0 in order of
		// appearance: renumber them after the ranks before.
		if w.B.Traj != nil {
			ids := map[int]int{}
			for i, id := range w.B.Traj {
				if _, ok := ids[id]; !ok {
					ids[id] = trajs + len(ids)
				}
				w.B.Traj[i] = ids[id]
			}
		}
		for i := range w.B.Group {
			w.B.Group[i] += w.GroupBase
		}
		if r == d.Comm.Rank() {
			s.SeqLo, s.SeqHi = seqs, seqs+w.B.NumSeqs()
		}
		seqs += w.B.NumSeqs()
		trajs += n
		parts[r] = &w.B
	}
	s.Global = trajs
	return concatBatches(parts), s, nil
}

// concatBatches packs parts back to back; a field is nil when it is nil
// in every part that has sequences.
func concatBatches(parts []*rl.Batch) *rl.Batch {
	g := &rl.Batch{Offsets: []int{0}}
	var have []*rl.Batch
	for _, p := range parts {
		if p.NumSeqs() > 0 {
			have = append(have, p)
		}
	}
	present := func(f func(*rl.Batch) bool) bool {
		for _, p := range have {
			if f(p) {
				return true
			}
		}
		return false
	}
	ints := func(get func(*rl.Batch) []int) []int {
		if !present(func(p *rl.Batch) bool { return get(p) != nil }) {
			return nil
		}
		var out []int
		for _, p := range have {
			out = append(out, get(p)...)
		}
		return out
	}
	bools := func(get func(*rl.Batch) []bool) []bool {
		if !present(func(p *rl.Batch) bool { return get(p) != nil }) {
			return nil
		}
		var out []bool
		for _, p := range have {
			out = append(out, get(p)...)
		}
		return out
	}
	floats := func(get func(*rl.Batch) []float64) []float64 {
		if !present(func(p *rl.Batch) bool { return get(p) != nil }) {
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
	g.PromptLen = ints(func(p *rl.Batch) []int { return p.PromptLen })
	g.Group = ints(func(p *rl.Batch) []int { return p.Group })
	g.Traj = ints(func(p *rl.Batch) []int { return p.Traj })
	g.Truncated = bools(func(p *rl.Batch) []bool { return p.Truncated })
	g.ActionMask = bools(func(p *rl.Batch) []bool { return p.ActionMask })
	g.AdvantageMask = bools(func(p *rl.Batch) []bool { return p.AdvantageMask })
	for _, f := range []struct {
		dst *[]float64
		get func(*rl.Batch) []float64
	}{
		{&g.Scores, func(p *rl.Batch) []float64 { return p.Scores }},
		{&g.Rewards, func(p *rl.Batch) []float64 { return p.Rewards }},
		{&g.SampleLogProb, func(p *rl.Batch) []float64 { return p.SampleLogProb }},
		{&g.OldLogProb, func(p *rl.Batch) []float64 { return p.OldLogProb }},
		{&g.RefLogProb, func(p *rl.Batch) []float64 { return p.RefLogProb }},
		{&g.OldValues, func(p *rl.Batch) []float64 { return p.OldValues }},
		{&g.Advantages, func(p *rl.Batch) []float64 { return p.Advantages }},
		{&g.Returns, func(p *rl.Batch) []float64 { return p.Returns }},
		{&g.BaselineScore, func(p *rl.Batch) []float64 { return p.BaselineScore }},
	} {
		*f.dst = floats(f.get)
	}
	return g
}

// ReduceMetrics combines a mini-batch's metrics over the ranks: the
// loss-valued ones (SumMetrics) add up, the rest are averaged over every
// rank's micro-batches, as one process averages over its own.
func (d *DP) ReduceMetrics(m rl.Metrics, micro int) (rl.Metrics, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct {
		M rl.Metrics
		N int
	}{m, micro}); err != nil {
		return nil, err
	}
	raw, err := comm.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, err
	}
	out, n := rl.Metrics{}, 0
	for r, p := range raw {
		var w struct {
			M rl.Metrics
			N int
		}
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&w); err != nil {
			return nil, fmt.Errorf("dp: the metrics of rank %d: %w", r, err)
		}
		n += w.N
		for k, v := range w.M {
			if rl.SumMetrics[k] {
				out[k] += v
			} else {
				out[k] += v * float64(w.N)
			}
		}
	}
	for k := range out {
		if !rl.SumMetrics[k] && n > 0 {
			out[k] /= float64(n)
		}
	}
	return out, nil
}

// trajSummary is what RolloutMetrics reads of a trajectory.
type trajSummary struct {
	Turns, ToolCalls int
	Finish           rl.Finish
	Outcome          env.Outcome
}

// RolloutMetrics is rl.RolloutMetrics over every rank's trajectories.
func (d *DP) RolloutMetrics(trajs []*rl.Trajectory) (rl.Metrics, error) {
	s := make([]trajSummary, len(trajs))
	for i, t := range trajs {
		s[i] = trajSummary{t.Turns, t.ToolCalls, t.Finish, t.Outcome}
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s); err != nil {
		return nil, err
	}
	raw, err := comm.GatherVar(d.Comm, buf.Bytes())
	if err != nil {
		return nil, err
	}
	var all []*rl.Trajectory
	for r, p := range raw {
		var part []trajSummary
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&part); err != nil {
			return nil, fmt.Errorf("dp: the trajectories of rank %d: %w", r, err)
		}
		for _, t := range part {
			all = append(all, &rl.Trajectory{Turns: t.Turns, ToolCalls: t.ToolCalls, Finish: t.Finish, Outcome: t.Outcome})
		}
	}
	return rl.RolloutMetrics(all), nil
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
			return fmt.Errorf("dp: the %s of rank %d differ from rank 0's", what, r)
		}
	}
	return nil
}

// SaveOptimizer writes opt's state to path: a collective, every rank
// calls it and rank 0 writes; ZeRO shards are gathered into the unsharded
// file, so any world size resumes from it.
func (d *DP) SaveOptimizer(opt *optim.AdamW, path string) error {
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

// ShardsMasters says whether dp.shard_masters gives the fp32 masters back.
func (d *DP) ShardsMasters() bool { return d.Cfg.ShardMasters }

// FillRecorded merges the ranks' recorded values (rollout correction's
// log-probs of the update's forwards): each rank recorded its own
// sequences of the global batch and left NaN elsewhere.
func (d *DP) FillRecorded(seen []float64) error {
	c := d.Comm
	buf := make([]byte, 8*len(seen))
	for k, v := range seen {
		binary.LittleEndian.PutUint64(buf[8*k:], math.Float64bits(v))
	}
	parts, err := comm.GatherVar(c, buf)
	if err != nil {
		return err
	}
	for r, p := range parts {
		if len(p) != len(buf) {
			return fmt.Errorf("dp: rank %d recorded %d log-probs, this rank %d", r, len(p)/8, len(seen))
		}
		for k := range seen {
			if v := math.Float64frombits(binary.LittleEndian.Uint64(p[8*k:])); !math.IsNaN(v) && math.IsNaN(seen[k]) {
				seen[k] = v
			}
		}
	}
	return nil
}
