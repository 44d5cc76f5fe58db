package main

import (
	"context"
	"fmt"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/comm/mpi"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
)

// Rollout ranks (dp.rollout_ranks=N with trainer.async; rl/dp/rollranks.go):
// of a run's ranks the last N only roll out and the others only train. All
// ranks load the model, warm-start and evaluate it as in data parallel;
// then a rollout rank serves the asynchronous rollout of its share of each
// batch (serveRollout) while the trainer ranks train on the batches it
// sends (a dp.RemoteRollout as the trainer's rl.AsyncSource), with data
// parallel among themselves over a communicator of their own
// (splitTrainers). Trainer rank 0 is the run's rank 0: it writes the run
// folder and the checkpoints, which keep every rollout rank's state.
// After the last step the rollout ranks hold the trained weights and join
// the held-out evaluation.

// rolloutRank is this process's place among the rollout ranks, -1 for a
// trainer rank or a run without them.
func rolloutRank(cfg *Config, l comm.Launch) int {
	first := dp.TrainerRanks(l.Size, cfg.DP.RolloutRanks)
	if cfg.DP.RolloutRanks == 0 || l.Rank < first {
		return -1
	}
	return l.Rank - first
}

// validateRolloutRanks reports a dp.rollout_ranks that the launch cannot
// run.
func validateRolloutRanks(cfg *Config, l comm.Launch) error {
	n := cfg.DP.RolloutRanks
	switch {
	case n == 0:
		if cfg.Trainer.Async && l.Size > 1 {
			return errAsyncDP
		}
	case !cfg.Trainer.Async:
		return fmt.Errorf("dp.rollout_ranks %d needs trainer.async: ranks that only roll out feed an asynchronous trainer", n)
	case l.Size == 1:
		return fmt.Errorf("dp.rollout_ranks %d in a run of one process: start the ranks with mpirun, srun or torchrun", n)
	case l.Size <= n:
		return fmt.Errorf("dp.rollout_ranks %d of %d ranks (launched by %s) leaves no rank to train: launch more ranks", n, l.Size, l.Launcher)
	}
	return nil
}

// splitTrainers is the trainer ranks' data-parallel part in a run with
// rollout ranks: nil with one trainer rank (a run of one process for the
// trainer), else a DP over a communicator of the trainer ranks alone (MPI:
// a split of the world; NCCL: a communicator of their own, its id sent
// over the world's). Every rank calls it; a rollout rank gets nil. release
// releases the communicator.
func splitTrainers(cfg *Config, l comm.Launch, world *dp.DP, dev model.Device) (train *dp.DP, release func(bool), err error) {
	release = func(bool) {}
	trainers := dp.TrainerRanks(l.Size, cfg.DP.RolloutRanks)
	if trainers == 1 {
		return nil, release, nil
	}
	rollout := rolloutRank(cfg, l) >= 0
	var c model.Comm
	switch w := world.Comm.(type) {
	case *mpi.Comm:
		color := 0
		if rollout {
			color = 1
		}
		s, err := w.Split(color, l.Rank)
		if err != nil {
			return nil, release, err
		}
		if rollout {
			return nil, release, s.Close()
		}
		c = s
	case *cuda.NCCL:
		var id cuda.NCCLID
		if l.Rank == 0 {
			if id, err = cuda.NewNCCLID(); err != nil {
				return nil, release, err
			}
		}
		all, err := w.GatherBytes(id[:])
		if err != nil {
			return nil, release, err
		}
		if rollout {
			return nil, release, nil
		}
		copy(id[:], all[:len(id)])
		if c, err = cuda.OpenNCCL(dev.(*cuda.Device), l.Rank, trainers, id); err != nil {
			return nil, release, err
		}
	default:
		return nil, release, fmt.Errorf("dp.rollout_ranks: no communicator of the trainer ranks over %T", world.Comm)
	}
	if train, err = dp.New(c, cfg.DP); err != nil {
		c.Close()
		return nil, release, err
	}
	return train, func(ok bool) {
		if ok {
			c.Close()
		}
	}, nil
}

// lastStep is the number of steps done when this invocation stops,
// starting from start: trainer.total_steps, or fewer under
// trainer.stop_after. The trainer ranks and the rollout ranks both
// compute it, and stop the rollout after it.
func lastStep(cfg *Config, start int) int {
	last := max(start, cfg.Trainer.TotalSteps)
	if n := cfg.Trainer.StopAfter; n > 0 && start+n < last {
		last = start + n
	}
	return last
}

// resumeStates are the rollout states a resumed run with n rollout ranks
// (0: one process) starts from, one per rollout rank; nil for a fresh run.
func resumeStates(st *trainerState, n int) ([]rl.AsyncState, error) {
	if st == nil {
		return nil, nil
	}
	states := st.asyncStates()
	if len(states) == 0 {
		return nil, fmt.Errorf("trainer.async: the checkpoint in %s is a synchronous run's; resume it without trainer.async", st.dir)
	}
	if want := max(n, 1); len(states) != want {
		return nil, fmt.Errorf("trainer.async: the checkpoint in %s holds the rollout state of %d rollout ranks and this run has %d (dp.rollout_ranks %d): resume with as many",
			st.dir, len(states), want, n)
	}
	return states, nil
}

// remoteRollout is the trainer ranks' source of trajectories in a run with
// rollout ranks.
func (j *job) remoteRollout(tr *rl.Trainer) error {
	cfg := j.cfg
	if _, err := resumeStates(j.resume, cfg.DP.RolloutRanks); err != nil {
		return err
	}
	first := dp.TrainerRanks(j.launch.Size, cfg.DP.RolloutRanks)
	tr.SetAsync(dp.NewRemoteRollout(j.par.Comm, first, cfg.RL.Rollout.MaxStaleness, lastStep(cfg, tr.Steps())))
	return nil
}

// serveRollout is a rollout rank's part of the RL steps: the asynchronous
// rollout of its share of every batch, from a copy of the policy that it
// refreshes from the weights trainer rank 0 broadcasts. finished says
// whether the run reached trainer.total_steps (not stopped early by
// trainer.stop_after), so that the rank joins the held-out evaluation.
func (j *job) serveRollout(ctx context.Context) (finished bool, err error) {
	cfg, s := j.cfg, j.s
	n, me := cfg.DP.RolloutRanks, rolloutRank(cfg, j.launch)
	s.Policy.Freeze() // it only receives the trainer's weights from here on
	start := 0
	if j.resume != nil {
		start = j.resume.Step
	}
	last := lastStep(cfg, start)
	finished = last == cfg.Trainer.TotalSteps
	if last == start {
		return finished, nil // nothing to train: the trainer ranks call no collective either
	}
	states, err := resumeStates(j.resume, n)
	if err != nil {
		return false, err
	}
	sampler, err := data.NewSampler(len(s.Train), data.SamplerConfig{BatchSize: cfg.Data.TrainBatchSize, Seed: cfg.Data.Seed, Shuffle: true})
	if err != nil {
		return false, err
	}
	var st *rl.AsyncState
	if states != nil {
		st = &states[me]
		if err := sampler.Restore(st.Sampler); err != nil {
			return false, fmt.Errorf("trainer.resume: %w", err)
		}
	}
	dev, closeDev, err := rolloutDevice(cfg, s)
	if err != nil {
		return false, err
	}
	defer closeDev()
	rc := &cfg.RL.Rollout
	lo, hi := dp.Share(cfg.Data.TrainBatchSize, me, n)
	if hi == lo {
		return false, fmt.Errorf("dp.rollout_ranks %d: rollout rank %d has no prompt of a batch of %d (data.train_batch_size)", n, me, cfg.Data.TrainBatchSize)
	}
	roll := &rl.Rollout{Cfg: rc, Tok: s.Tok, Env: s.Env, Stop: s.Stop, StreamBase: uint64(lo * rc.N)}
	src := dp.ShareSource{Src: samplerSource{sampler, s.Train}, J: me, N: n}
	a, err := rl.StartAsyncRollout(ctx, roll, s.Policy, start, dev, rc.SlotsFor((hi-lo)*(rc.MaxStaleness+1)),
		cfg.Model.MaxContext, hi-lo, src, st)
	if err != nil {
		return false, err
	}
	defer a.Close()
	if err := dp.ServeRollout(ctx, j.par.Comm, a, s.Policy, start); err != nil {
		return false, fmt.Errorf("rollout rank %d: %w", me, err)
	}
	return finished, nil
}

// asyncState is what a checkpoint keeps of an asynchronous run's rollout:
// the state of this process's rollout or of the one rollout rank (one),
// or every rollout rank's (ranks), and the sampler's position before the
// oldest batch with an untrained group; ok is false for a synchronous run.
func asyncState(tr *rl.Trainer) (one *rl.AsyncState, ranks []rl.AsyncState, pos data.SamplerState, ok bool) {
	switch a := tr.Async.(type) {
	case *rl.AsyncRollout:
		st := a.State()
		return &st, nil, st.Sampler, true
	case *dp.RemoteRollout:
		states := a.States()
		if len(states) == 0 {
			return nil, nil, pos, false
		}
		oldest := 0
		for i, s := range states {
			if s.First < states[oldest].First {
				oldest = i
			}
		}
		if len(states) == 1 {
			return &states[0], nil, states[0].Sampler, true
		}
		return nil, states, states[oldest].Sampler, true
	}
	return nil, nil, pos, false
}

// asyncStates are the rollout states the checkpoint keeps: one for a run
// of one process or one rollout rank, one per rollout rank, or none for a
// synchronous run.
func (s *trainerState) asyncStates() []rl.AsyncState {
	if s.Async != nil {
		return []rl.AsyncState{*s.Async}
	}
	return s.AsyncRanks
}
