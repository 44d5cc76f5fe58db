package dp

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/rl"
)

// Rollout ranks (dp.rollout_ranks = N, with trainer.async): the last N
// ranks of the run generate and the others train, so that no trainer rank
// ever runs the rollout. Each rollout rank runs the asynchronous rollout
// of one process (rl/async.go) over its share of every prompt batch
// (Share), from a copy of the policy; the trainer ranks take each step's
// trajectories from them (RemoteRollout) and, after each update, trainer
// rank 0 broadcasts the new weights, which the rollout ranks copy in
// between two of their forward steps (ServeRollout).
//
// Every step is two collectives over the whole run (the world
// communicator), which both sides call in the same order:
//
//  1. the batch: a GatherVar in which each rollout rank sends the
//     trajectories its Take returned for version v, its staleness counts
//     and its checkpoint state, and the trainer ranks send nothing;
//  2. the weights: one byte from every rank (trainer rank 0's says
//     whether another step follows), then a Broadcast of the policy's
//     weights from rank 0.
//
// A rollout rank waits in these collectives on its own goroutine while its
// rollout goes on generating; a trainer rank waits in the first only when
// the batch is not ready. The trainer ranks' own collectives (the
// gathered batch, the gradient sums) go over a communicator of the trainer
// ranks alone, or none with one trainer rank.

// rolloutPayload is what a rollout rank sends for one step.
type rolloutPayload struct {
	Trajs   []*rl.Trajectory
	Metrics rl.Metrics
	State   rl.AsyncState
	Err     string // why its rollout stopped; empty when it did not
}

// TrainerRanks is how many ranks of a world of size train when its last
// n roll out: ranks [0, TrainerRanks) train, and the first rollout rank
// is TrainerRanks.
func TrainerRanks(size, n int) int { return size - n }

// Share is rollout rank j's (0 ≤ j < n) contiguous share of a batch of
// prompts: the same cut as a trainer rank's Shard, so its first trajectory
// draws from the stream the whole batch's would (lo·N).
func Share(prompts, j, n int) (lo, hi int) { return j * prompts / n, (j + 1) * prompts / n }

// ShareSource hands a rollout rank its share of each batch of Src.
type ShareSource struct {
	Src  rl.BatchSource
	J, N int
}

func (s ShareSource) Next() []data.Sample {
	b := s.Src.Next()
	lo, hi := Share(len(b), s.J, s.N)
	return b[lo:hi]
}

func (s ShareSource) State() data.SamplerState { return s.Src.State() }

// RemoteRollout is the trainer ranks' rl.AsyncSource in a run with rollout
// ranks: Take gathers the batch the rollout ranks took, Refresh sends them
// the updated weights.
type RemoteRollout struct {
	world model.Comm
	first int // the first rollout rank
	k     int // rollout.max_staleness
	last  int // the version after which the rollout ranks stop
	// states are the rollout ranks' checkpoint states after the last Take.
	states []rl.AsyncState
}

// NewRemoteRollout is the trainer's side of the rollout ranks [first,
// world.Size()) under the bound k; they stop after the weights of version
// last (the run's last step).
func NewRemoteRollout(world model.Comm, first, k, last int) *RemoteRollout {
	return &RemoteRollout{world: world, first: first, k: k, last: last}
}

// Take gathers batch v from the rollout ranks: their trajectories in rank
// order, groups numbered through, with the age metrics of the whole batch
// and the sums of their group counts.
func (r *RemoteRollout) Take(ctx context.Context, v int) ([]*rl.Trajectory, rl.Metrics, error) {
	raw, err := comm.GatherVar(r.world, nil)
	if err != nil {
		return nil, nil, err
	}
	var all []*rl.Trajectory
	sums := rl.Metrics{}
	r.states = r.states[:0]
	var failed error
	base := 0 // groups of the ranks before
	for rank := r.first; rank < len(raw); rank++ {
		var p rolloutPayload
		if err := gob.NewDecoder(bytes.NewReader(raw[rank])).Decode(&p); err != nil {
			return nil, nil, fmt.Errorf("dp: the batch of rollout rank %d: %w", rank, err)
		}
		if p.Err != "" {
			failed = errors.Join(failed, fmt.Errorf("dp: rollout rank %d: %s", rank, p.Err))
			continue
		}
		groups := 0
		for _, t := range p.Trajs {
			groups = max(groups, t.Group+1)
			t.Group += base
		}
		base += groups
		all = append(all, p.Trajs...)
		for _, k := range []string{"async/groups", "async/due", "async/buffered"} {
			sums[k] += p.Metrics[k]
		}
		r.states = append(r.states, p.State)
	}
	if failed != nil {
		return nil, nil, failed
	}
	m := rl.AgeMetrics(all, v, r.k)
	for k, x := range sums {
		m[k] = x
	}
	return all, m, nil
}

// Refresh broadcasts policy's weights of version v from rank 0 to every
// rank, with word of whether the rollout ranks go on.
func (r *RemoteRollout) Refresh(policy *model.Model, v int) error {
	more := byte(1)
	if v >= r.last {
		more = 0
	}
	if _, err := r.world.GatherBytes([]byte{more}); err != nil {
		return err
	}
	return r.world.Broadcast(policy.Params, 0)
}

// States are the rollout ranks' checkpoint states after the last Take, in
// rank order: a checkpoint taken after the step keeps them, and each
// rollout rank resumes from its own.
func (r *RemoteRollout) States() []rl.AsyncState { return append([]rl.AsyncState(nil), r.states...) }

// ServeRollout is a rollout rank's part of every step from version v on:
// it sends the trainer ranks the batch a takes for the version, receives
// the updated weights into policy, and refreshes a's copy from them, until
// trainer rank 0 says the run's last step is done. policy then holds the
// trained weights.
func ServeRollout(ctx context.Context, world model.Comm, a *rl.AsyncRollout, policy *model.Model, v int) error {
	for ; ; v++ {
		trajs, m, err := a.Take(ctx, v)
		p := rolloutPayload{Trajs: trajs, Metrics: m, State: a.State()}
		if err != nil {
			p = rolloutPayload{Err: err.Error()}
		}
		var buf bytes.Buffer
		if eerr := gob.NewEncoder(&buf).Encode(p); eerr != nil {
			return fmt.Errorf("dp: encoding the batch of version %d: %w", v, eerr)
		}
		if _, gerr := comm.GatherVar(world, buf.Bytes()); gerr != nil {
			return gerr
		}
		if err != nil { // the trainer ranks stop with it too
			return err
		}
		more, err := world.GatherBytes([]byte{0})
		if err != nil {
			return err
		}
		if err := world.Broadcast(policy.Params, 0); err != nil {
			return err
		}
		if more[0] == 0 {
			return nil
		}
		if err := a.Refresh(policy, v+1); err != nil {
			return err
		}
	}
}
