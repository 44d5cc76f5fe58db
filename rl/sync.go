package rl

import (
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// Sync is the trainer's data-parallel part, which the trainer always
// calls: how a step's prompts are shared among the processes, how their
// batches, metrics and gradients are combined, and how the optimizers are
// built, stepped and saved. Local is a run of one process; rl/dp's DP
// spans the ranks a launcher started (mpirun, srun, torchrun).
type Sync interface {
	// Rank0 says whether this process writes the run folder and logs.
	Rank0() bool
	// Shard is this process's share of a step's prompts, n samples each.
	Shard(prompts []data.Sample, n int) Slice
	// GatherBatch returns the global batch from this process's part of it
	// (the trajectories of s), and s as the global batch has it: its
	// SeqLo, SeqHi are then this process's packed sequences of the global
	// batch and Global its trajectories, which differ from the shard's
	// where rollout.verify=drop dropped some or step mode packs a
	// trajectory as several sequences.
	GatherBatch(local *Batch, s Slice) (*Batch, Slice, error)
	// RolloutMetrics is RolloutMetrics over every process's trajectories.
	RolloutMetrics(trajs []*Trajectory) (Metrics, error)
	// ReduceMetrics combines a mini-batch's metrics, averaged over micro
	// micro-batches here, over the processes (SumMetrics add up).
	ReduceMetrics(m Metrics, micro int) (Metrics, error)

	// NewOptimizer returns the AdamW of params from grads: the whole
	// arena's, or this rank's shard of it under ZeRO.
	NewOptimizer(dev model.Device, params, grads model.Buffer, cfg optim.Config, totalSteps int) (*optim.AdamW, error)
	// ShardsMasters says whether ShardMasters gives the fp32 masters back
	// (dp.shard_masters): no process then holds the whole fp32 policy.
	ShardsMasters() bool
	// ShardMasters keeps only this rank's part of mdl's fp32 masters.
	ShardMasters(mdl *model.Model, opt *optim.AdamW) error
	// ZeroGrads clears mdl's gradients before a mini-batch (under ZeRO-2
	// it hooks the backward to opt's buckets instead).
	ZeroGrads(mdl *model.Model, opt *optim.AdamW)
	// IdleRounds is how many micro-batches this process, running mine,
	// runs fewer than the busiest one (ZeRO-2 sends every bucket as often
	// on every rank); Idle sends that many rounds of zeros.
	IdleRounds(mdl *model.Model, opt *optim.AdamW, mine int) (int, error)
	Idle(opt *optim.AdamW, n int)
	// Step sums mdl's gradients over the processes and steps opt.
	Step(mdl *model.Model, opt *optim.AdamW) (optim.StepResult, error)
	// SaveOptimizer writes opt's whole state to path (a collective: every
	// rank calls it, rank 0 writes).
	SaveOptimizer(opt *optim.AdamW, path string) error
	// CheckInSync returns an error unless every process holds the same
	// values in buf (what names them).
	CheckInSync(dev model.Device, buf model.Buffer, what string) error
	// FillRecorded fills each NaN of vals, values over the global batch's
	// tokens of which each process recorded its own sequences', with the
	// value another process recorded there.
	FillRecorded(vals []float64) error
}

// Slice is a process's share of a step's global batch: prompts
// [PromptLo, PromptHi) and sequences [SeqLo, SeqHi) of Global. Shard
// counts trajectories (one sequence each, before any is dropped: the
// sampling streams are numbered so); GatherBatch's counts packed
// sequences, and Global the trajectories.
type Slice struct {
	PromptLo, PromptHi int
	SeqLo, SeqHi       int
	Global             int
}

// Whole is the slice of a process that holds the whole batch.
func Whole(prompts, n int) Slice {
	return Slice{PromptHi: prompts, SeqHi: prompts * n, Global: prompts * n}
}

// Own returns the process's sequences of the global mini-batch [lo, hi),
// as a slice of mini. The zero Slice owns everything (a Trainer updated
// outside Step).
func (s Slice) Own(mini *Batch, lo, hi int) *Batch {
	a, b := max(lo, s.SeqLo), min(hi, s.SeqHi)
	if s == (Slice{}) || a == lo && b == hi {
		return mini
	}
	if b < a {
		a, b = lo, lo
	}
	return mini.Slice(a-lo, b-lo)
}

// SumMetrics are the loss-valued metrics whose micro-batch values add up to
// the mini-batch's; the rest are averaged.
var SumMetrics = map[string]bool{"actor/pg_loss": true, "actor/entropy": true, "actor/kl_loss": true, "critic/vf_loss": true}

// Local is the Sync of a run of one process: the whole batch, its own
// metrics, and the optimizer's own step.
type Local struct{}

func (Local) Rank0() bool                  { return true }
func (Local) FillRecorded([]float64) error { return nil }
func (Local) Shard(prompts []data.Sample, n int) Slice {
	return Whole(len(prompts), n)
}
func (Local) GatherBatch(local *Batch, s Slice) (*Batch, Slice, error) {
	n, err := local.Trajectories()
	if err != nil {
		return nil, s, err
	}
	s.SeqLo, s.SeqHi, s.Global = 0, local.NumSeqs(), n
	return local, s, nil
}
func (Local) RolloutMetrics(trajs []*Trajectory) (Metrics, error) {
	return RolloutMetrics(trajs), nil
}
func (Local) ReduceMetrics(m Metrics, _ int) (Metrics, error) { return m, nil }
func (Local) NewOptimizer(dev model.Device, params, grads model.Buffer, cfg optim.Config, totalSteps int) (*optim.AdamW, error) {
	return optim.New(dev, params, grads, cfg, totalSteps)
}
func (Local) ShardsMasters() bool                                     { return false }
func (Local) ShardMasters(*model.Model, *optim.AdamW) error           { return nil }
func (Local) ZeroGrads(mdl *model.Model, _ *optim.AdamW)              { mdl.ZeroGrads() }
func (Local) IdleRounds(*model.Model, *optim.AdamW, int) (int, error) { return 0, nil }
func (Local) Idle(*optim.AdamW, int)                                  {}
func (Local) Step(_ *model.Model, opt *optim.AdamW) (optim.StepResult, error) {
	return opt.Step(1), nil
}
func (Local) SaveOptimizer(opt *optim.AdamW, path string) error    { return opt.Save(path) }
func (Local) CheckInSync(model.Device, model.Buffer, string) error { return nil }

// sync is t.Sync, or Local for a Trainer built without NewTrainer.
func (t *Trainer) sync() Sync {
	if t.Sync == nil {
		return Local{}
	}
	return t.Sync
}

// SaveOptimizer writes opt's state to path. In a data-parallel run every
// rank calls it (a collective) and rank 0 writes; ZeRO shards are gathered
// into the unsharded file, so any world size resumes from it.
func (t *Trainer) SaveOptimizer(opt *optim.AdamW, path string) error {
	return t.sync().SaveOptimizer(opt, path)
}

// LoadOptimizer restores what SaveOptimizer wrote (every rank reads it;
// a ZeRO shard keeps its spans).
func (t *Trainer) LoadOptimizer(opt *optim.AdamW, path string) error {
	return opt.Load(path)
}

// FollowCheckpoint is a rank other than 0's part of saving a checkpoint:
// the collectives of SaveOptimizer, in the order rank 0 runs them, and the
// check that the weights are still identical.
func (t *Trainer) FollowCheckpoint() error {
	if err := t.SaveOptimizer(t.ActorOpt, ""); err != nil {
		return err
	}
	if t.Critic != nil {
		if err := t.SaveOptimizer(t.CriticOpt, ""); err != nil {
			return err
		}
	}
	return t.CheckInSync()
}

// CheckInSync compares the policy (and critic) weights across the ranks;
// rank 0 calls it when it writes a checkpoint, the others in
// FollowCheckpoint.
func (t *Trainer) CheckInSync() error {
	if err := t.sync().CheckInSync(t.Policy.Dev, t.Policy.Params, "policy weights"); err != nil {
		return err
	}
	if t.Critic != nil {
		return t.sync().CheckInSync(t.Critic.Dev, t.Critic.Params, "critic weights")
	}
	return nil
}
