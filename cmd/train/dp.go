package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/comm/mpi"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
)

// Data-parallel launch: `mpirun -np N train ...` or srun, or torchrun's
// variables, start N copies of this command; each reads its rank from the
// launcher's environment (comm.LaunchFromEnv), joins the communicator,
// and trains on its share of every global batch (rl/dp/dp.go). Rank 0 owns the
// run folder, the console and the logs; the others write nothing.

// dpLaunch reads the launcher's environment and, for one process per GPU,
// narrows the visible GPUs to the local rank's card before the device
// opens.
func dpLaunch(cfg *Config) (comm.Launch, error) {
	l, err := comm.LaunchFromEnv()
	if err != nil {
		return l, err
	}
	if l.Size > 1 {
		if err := cfg.DP.Validate(); err != nil {
			return l, err
		}
		if cfg.Trainer.Device == "cuda" {
			pickCard(l.LocalRank)
		}
	}
	return l, nil
}

// startDP joins the run's communicator when the launcher started more
// than one process; it returns nil (one process) otherwise: MPI for the
// CPU device, NCCL for the CUDA device (its id sent over a TCP rendezvous
// at MASTER_ADDR:MASTER_PORT, or over MPI under mpirun and srun). stop
// ends the heartbeat and the communicator: stop(true) after a run that
// finished on every rank; stop(false) after an error, which leaves the
// heartbeat to close with the process, so that the other ranks, perhaps
// waiting in a collective, stop naming this one. A rank that dies or falls
// silent stops this process with an error naming it (exit status 1),
// since a collective would wait for it forever.
func startDP(cfg *Config, l comm.Launch, dev model.Device) (par *dp.DP, stop func(ok bool), err error) {
	nothing := func(bool) {}
	if l.Size == 1 {
		return nil, nothing, nil
	}
	var c model.Comm
	var closers []func() error
	fail := func(err error) (*dp.DP, func(bool), error) {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		return nil, nothing, fmt.Errorf("dp: rank %d of %d (launched by %s): %w", l.Rank, l.Size, l.Launcher, err)
	}
	var m *mpi.Comm
	if l.Launcher == "mpirun" || l.Launcher == "srun" {
		if m, err = mpi.Open(); err != nil {
			return fail(err)
		}
		closers = append(closers, m.Close)
		if m.Rank() != l.Rank || m.Size() != l.Size {
			return fail(fmt.Errorf("MPI says rank %d of %d, the environment %d of %d", m.Rank(), m.Size(), l.Rank, l.Size))
		}
		c = m
	}
	if gpu, ok := dev.(*cuda.Device); ok {
		n, err := joinNCCL(gpu, l, m)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, n.Close)
		c = n
	} else if m == nil {
		return fail(fmt.Errorf("the CPU device's communicator is MPI: start the run with mpirun or srun"))
	}
	w, err := comm.Watch(c, time.Duration(cfg.DP.HeartbeatS*float64(time.Second)), func(err error) {
		fmt.Fprintf(os.Stderr, "train: rank %d: data-parallel run stopped: %v\n", l.Rank, err)
		os.Exit(1)
	})
	if err != nil {
		return fail(err)
	}
	if par, err = dp.New(c, cfg.DP); err != nil {
		w.Stop()
		return fail(err)
	}
	return par, func(ok bool) {
		if !ok {
			return
		}
		c.Barrier()
		w.Stop()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}, nil
}

// joinNCCL makes rank 0's NCCL id known to every rank (over MPI when m is
// open, else the TCP rendezvous) and opens the communicator.
func joinNCCL(gpu *cuda.Device, l comm.Launch, m *mpi.Comm) (*cuda.NCCL, error) {
	var id cuda.NCCLID
	if l.Rank == 0 {
		var err error
		if id, err = cuda.NewNCCLID(); err != nil {
			return nil, err
		}
	}
	if m != nil {
		all, err := m.GatherBytes(id[:])
		if err != nil {
			return nil, err
		}
		copy(id[:], all[:len(id)])
	} else {
		addr, err := cuda.RendezvousAddr()
		if err != nil {
			return nil, err
		}
		if err := cuda.RendezvousID(addr, l.Rank, l.Size, &id, 5*time.Minute); err != nil {
			return nil, err
		}
	}
	return cuda.OpenNCCL(gpu, l.Rank, l.Size, id)
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
func rankOutput(l comm.Launch, out io.Writer) io.Writer {
	if l.Rank == 0 {
		return out
	}
	return io.Discard
}

// trainerSync is the trainer's data-parallel part: dp, or in a run of one
// process (dp nil) rl.Local.
func trainerSync(par *dp.DP) rl.Sync {
	if par == nil {
		return rl.Local{}
	}
	return par
}

// syncWarmStart makes every rank start RL from rank 0's warm-started
// policy (each rank ran the same deterministic warm start; the broadcast
// makes it so whatever the floating-point path).
func syncWarmStart(par *dp.DP, m *model.Model) error {
	if par == nil {
		return nil
	}
	return par.Comm.Broadcast(m.Params, 0)
}

// checkpointAll saves a checkpoint: rank 0 writes it, the other ranks
// join its collectives (ZeRO-1 moments, the weights check).
func checkpointAll(par *dp.DP, save func() error, tr *rl.Trainer) error {
	return par.WithMasters(tr.Policy, func() error { // dp.shard_masters: the fp32 weights gathered on rank 0 for the save
		if par.Rank0() {
			if err := save(); err != nil {
				return err
			}
			return tr.CheckInSync()
		}
		return tr.FollowCheckpoint()
	})
}

// rankDataDir is the folder where a rank builds its world, index and
// tokenizer: rank 0 the run's, the others one of their own inside it, so
// that no two processes write one file (each rank builds the same files
// from the same seeds).
func rankDataDir(par *dp.DP, dir string) string {
	if par.Rank0() {
		return dir
	}
	return filepath.Join(dir, fmt.Sprintf("rank%d", par.Comm.Rank()))
}
