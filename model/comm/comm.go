// Package comm links the processes of a data-parallel run: where a
// process sits in the run (LaunchFromEnv reads mpirun's, srun's or
// torchrun's variables), the one-process communicator Single, helpers
// over any model.Comm (GatherVar, SumFloat64s), and Watch, a heartbeat
// beside the transport that turns a dead rank into an error instead of a
// hang. The central type is model.Comm, the seam the trainer sees,
// declared in package model beside model.Device; package comm/mpi
// implements it over MPI for the CPU device, and package cuda over NCCL.
//
// Errors: a launcher variable that is not a number, or a rank outside its
// world, is returned naming the variable; a transport failure (a rank that
// died, a network error) is returned from the collective that met it.
// Collective shapes are the caller's arithmetic: a length mismatch panics.
package comm

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/r1go/r1go/model"
)

// Single is the communicator of a run with one process: every collective
// leaves its input as it is (the sum over one rank is the value itself).
type Single struct{ Dev model.Device }

func (Single) Rank() int                         { return 0 }
func (Single) Size() int                         { return 1 }
func (Single) AllReduce(model.Buffer) error      { return nil }
func (Single) Broadcast(model.Buffer, int) error { return nil }
func (Single) Barrier() error                    { return nil }
func (Single) Close() error                      { return nil }
func (s Single) ReduceScatter(dst, src model.Buffer) error {
	CheckCollective("ReduceScatter", dst.Len(), src.Len(), 1)
	s.Dev.Copy(dst, src)
	return nil
}
func (s Single) AllGather(dst, src model.Buffer) error {
	CheckCollective("AllGather", src.Len(), dst.Len(), 1)
	s.Dev.Copy(dst, src)
	return nil
}
func (Single) GatherBytes(src []byte) ([]byte, error) { return append([]byte(nil), src...), nil }

// CheckCollective panics unless big = size·small: collective shapes are
// the caller's arithmetic, not input. Comm implementations call it.
func CheckCollective(op string, small, big, size int) {
	if big != small*size {
		panic(fmt.Sprintf("comm: %s of %d values into %d over %d ranks", op, small, big, size))
	}
}

// GatherVar all-gathers byte strings of different lengths: first the
// lengths, then every string padded to the longest.
func GatherVar(c model.Comm, src []byte) ([][]byte, error) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(src)))
	raw, err := c.GatherBytes(n[:])
	if err != nil {
		return nil, err
	}
	lens := make([]int, c.Size())
	most := 0
	for r := range lens {
		lens[r] = int(binary.LittleEndian.Uint64(raw[8*r:]))
		most = max(most, lens[r])
	}
	pad := make([]byte, most)
	copy(pad, src)
	all, err := c.GatherBytes(pad)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, c.Size())
	for r := range out {
		out[r] = all[r*most : r*most+lens[r]]
	}
	return out, nil
}

// SumFloat64s sums x over the ranks, adding in rank order, so every rank
// gets the same bits whatever the transport's reduction order.
func SumFloat64s(c model.Comm, x []float64) ([]float64, error) {
	b := make([]byte, 8*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	all, err := c.GatherBytes(b)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(x))
	for r := 0; r < c.Size(); r++ {
		for i := range out {
			out[i] += math.Float64frombits(binary.LittleEndian.Uint64(all[r*len(b)+8*i:]))
		}
	}
	return out, nil
}

// Launch is where a process sits in a run, as its launcher says.
type Launch struct {
	Rank, Size, LocalRank int
	Launcher              string // "mpirun", "srun", "torchrun" or "" (one process)
}

// LaunchFromEnv reads rank, world size and local rank from the launcher's
// environment: Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK). With none of them it is one process.
func LaunchFromEnv() (Launch, error) {
	for _, l := range []struct{ name, rank, size, local string }{
		{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	} {
		rs, ok := os.LookupEnv(l.rank)
		if !ok {
			continue
		}
		out := Launch{Launcher: l.name}
		var err error
		if out.Rank, err = strconv.Atoi(rs); err != nil {
			return Launch{}, fmt.Errorf("comm: %s=%q is not a rank", l.rank, rs)
		}
		if out.Size, err = strconv.Atoi(os.Getenv(l.size)); err != nil || out.Size < 1 {
			return Launch{}, fmt.Errorf("comm: %s=%q is not a world size (launched by %s)", l.size, os.Getenv(l.size), l.name)
		}
		if s := os.Getenv(l.local); s != "" {
			if out.LocalRank, err = strconv.Atoi(s); err != nil {
				return Launch{}, fmt.Errorf("comm: %s=%q is not a local rank", l.local, s)
			}
		}
		if out.Rank < 0 || out.Rank >= out.Size {
			return Launch{}, fmt.Errorf("comm: rank %d outside a world of %d (launched by %s)", out.Rank, out.Size, l.name)
		}
		return out, nil
	}
	return Launch{Size: 1}, nil
}
