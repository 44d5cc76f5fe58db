package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/mpi"
	"github.com/r1go/r1go/rl"
)

// Data-parallel launch: `mpirun -np N train ...` or srun, or torchrun's
// variables, start N copies of this command; each reads its rank from the
// launcher's environment (model.LaunchFromEnv), joins the communicator,
// and trains on its share of every global batch (rl/dp.go). Rank 0 owns the
// run folder, the console and the logs; the others write nothing.

// startDP joins the run's communicator when the launcher started more
// than one process; it returns nil (one process) otherwise. stop ends the
// heartbeat and the communicator. A rank that dies or falls silent stops
// this process with an error naming it (exit status 1), since a collective
// would wait for it forever.
func startDP(cfg *Config) (dp *rl.DP, stop func(), err error) {
	l, err := model.LaunchFromEnv()
	if err != nil {
		return nil, func() {}, err
	}
	if l.Size == 1 {
		return nil, func() {}, nil
	}
	if err := cfg.DP.Validate(); err != nil {
		return nil, func() {}, err
	}
	if cfg.Trainer.Device == "cuda" {
		// One process per GPU: LOCAL_RANK picks the card among the visible ones.
		pickCard(l.LocalRank)
		return nil, func() {}, fmt.Errorf("dp: %d ranks on trainer.device=cuda need the NCCL communicator, not yet wired (launched by %s)", l.Size, l.Launcher)
	}
	var c model.Comm
	switch l.Launcher {
	case "mpirun", "srun":
		m, err := mpi.Open()
		if err != nil {
			return nil, func() {}, fmt.Errorf("dp: rank %d of %d (launched by %s): %w", l.Rank, l.Size, l.Launcher, err)
		}
		c = m
	default:
		return nil, func() {}, fmt.Errorf("dp: %d ranks launched by %s: the CPU device's communicator is MPI; start the run with mpirun or srun", l.Size, l.Launcher)
	}
	if c.Rank() != l.Rank || c.Size() != l.Size {
		return nil, func() {}, fmt.Errorf("dp: MPI says rank %d of %d, %s's environment %d of %d", c.Rank(), c.Size(), l.Launcher, l.Rank, l.Size)
	}
	w, err := model.Watch(c, time.Duration(cfg.DP.HeartbeatS*float64(time.Second)), func(err error) {
		fmt.Fprintf(os.Stderr, "train: rank %d: data-parallel run stopped: %v\n", c.Rank(), err)
		os.Exit(1)
	})
	if err != nil {
		return nil, func() {}, err
	}
	if dp, err = rl.NewDP(c, cfg.DP); err != nil {
		return nil, func() {}, err
	}
	return dp, func() {
		c.Barrier()
		w.Stop()
		c.Close()
	}, nil
}

// pickCard narrows CUDA_VISIBLE_DEVICES to the local rank's card.
func pickCard(local int) {
	vis := os.Getenv("CUDA_VISIBLE_DEVICES")
	if vis == "" {
		os.Setenv("CUDA_VISIBLE_DEVICES", fmt.Sprint(local))
		return
	}
	if cards := strings.Split(vis, ","); local < len(cards) {
		os.Setenv("CUDA_VISIBLE_DEVICES", cards[local])
	}
}

// rankOutput is where a rank prints: rank 0 the console, the others nothing.
func rankOutput(dp *rl.DP, out io.Writer) io.Writer {
	if dp.Rank0() {
		return out
	}
	return io.Discard
}

// syncWarmStart makes every rank start RL from rank 0's warm-started
// policy (each rank ran the same deterministic warm start; the broadcast
// makes it so whatever the floating-point path).
func syncWarmStart(dp *rl.DP, m *model.Model) error {
	if dp == nil {
		return nil
	}
	return dp.Comm.Broadcast(m.Params, 0)
}

// checkpointAll saves a checkpoint: rank 0 writes it, the other ranks
// join its collectives (ZeRO-1 moments, the weights check).
func checkpointAll(dp *rl.DP, save func() error, tr *rl.Trainer) error {
	if dp.Rank0() {
		if err := save(); err != nil {
			return err
		}
		return tr.CheckInSync()
	}
	return tr.FollowCheckpoint()
}

// rankDataDir is the folder where a rank builds its world, index and
// tokenizer: rank 0 the run's, the others one of their own inside it, so
// that no two processes write one file (each rank builds the same files
// from the same seeds).
func rankDataDir(dp *rl.DP, dir string) string {
	if dp.Rank0() {
		return dir
	}
	return filepath.Join(dir, fmt.Sprintf("rank%d", dp.Comm.Rank()))
}
