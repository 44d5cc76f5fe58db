package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model/comm"
)

// TestAsyncRolloutRanks trains the data-parallel test config on one
// process, synchronously, and asynchronously with rollout.max_staleness 0
// on MPI ranks of which the last only rolls out:
//
//   - two ranks (one trainer, one rollout rank), stopped after the step-2
//     checkpoint and resumed: the trainer is a run of one process and the
//     rollout rank samples batch v from the weights of version v that it
//     received, on the same streams, so the final weights and every step's
//     metrics are the synchronous run's bit for bit, but for the gradient
//     norm: mpirun binds a rank to one core, and the norm's float64 sum
//     runs over that many threads' partial sums (1e-14 relative);
//   - three ranks (two trainers with a communicator of their own, one
//     rollout rank): the synchronous run's within the data-parallel
//     tolerance (the two trainers sum their gradients over MPI).
func TestAsyncRolloutRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer four times, three of them under mpirun")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin libopenmpi3 (.ci/run installs them)")
	}
	one, two, three := t.TempDir(), t.TempDir(), t.TempDir()
	c := dpConfig(t, one)
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	asyncRanks := func(dir string) Config {
		c := dpConfig(t, dir)
		c.Trainer.Async, c.DP.RolloutRanks = true, 1
		return c
	}
	a := asyncRanks(two)
	a.Trainer.StopAfter = 2
	if o, err := mpiRun(t, 2, a, nil); err != nil {
		t.Fatalf("mpirun with a rollout rank: %v\n%s", err, o)
	}
	var st trainerState
	if raw, err := os.ReadFile(filepath.Join(two, "global_step_2", "trainer_state.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(raw, &st); err != nil || st.Async == nil || st.Async.First != 2 {
		t.Fatalf("the step-2 checkpoint's rollout state: %+v (%v)", st.Async, err)
	}
	a = asyncRanks(two)
	a.Trainer.Resume = true
	if o, err := mpiRun(t, 2, a, nil); err != nil {
		t.Fatalf("mpirun resuming with a rollout rank: %v\n%s", err, o)
	}
	if o, err := mpiRun(t, 3, asyncRanks(three), nil); err != nil {
		t.Fatalf("mpirun with two trainer ranks and a rollout rank: %v\n%s", err, o)
	}
	final := func(dir string) []float32 { return params(t, filepath.Join(dir, "global_step_3", "actor")) }

	ra, rb, rc := records(t, one), records(t, two), records(t, three)
	if len(ra) != 3 || len(rb) != 3 || len(rc) != 3 {
		t.Fatalf("%d, %d and %d metric records, want 3", len(ra), len(rb), len(rc))
	}
	for i := range ra {
		for _, k := range []string{"critic/score/mean", "actor/pg_loss", "actor/grad_norm", "response_length/mean", "perf/total_num_tokens"} {
			if ra[i].Data[k] != rb[i].Data[k] && (k != "actor/grad_norm" || !close(ra[i].Data[k], rb[i].Data[k])) {
				t.Errorf("step %d %s: %v synchronous, %v with a rollout rank", i+1, k, ra[i].Data[k], rb[i].Data[k])
			}
			if !close(ra[i].Data[k], rc[i].Data[k]) {
				t.Errorf("step %d %s: %v synchronous, %v with two trainer ranks and a rollout rank", i+1, k, ra[i].Data[k], rc[i].Data[k])
			}
		}
		if v := rb[i].Data["async/version"]; v != float64(i) {
			t.Errorf("step %d: async/version %v", i+1, v)
		}
	}
	pa, pb := final(one), final(two)
	for i := range pa {
		if math.Float32bits(pa[i]) != math.Float32bits(pb[i]) {
			t.Fatalf("parameter %d: %v synchronous, %v with a rollout rank", i, pa[i], pb[i])
		}
	}
	if d, _ := maxDiff(t, pa, final(three)); d > weightTol {
		t.Errorf("final weights with two trainer ranks and a rollout rank differ by %.3g > %g", d, weightTol)
	}
}

// TestRolloutRanksValidation: the launches dp.rollout_ranks cannot run
// are refused before anything starts, naming the key, and rolloutRank
// places the last ranks.
func TestRolloutRanksValidation(t *testing.T) {
	mpirun := func(rank, size int) comm.Launch { return comm.Launch{Rank: rank, Size: size, Launcher: "mpirun"} }
	for _, c := range []struct {
		async bool
		n     int
		l     comm.Launch
		want  string // "" for none
	}{
		{async: true, n: 1, l: mpirun(0, 2)},
		{async: true, n: 2, l: mpirun(0, 3)},
		{async: false, n: 0, l: mpirun(0, 2)},
		{async: true, n: 0, l: comm.Launch{Size: 1}},
		{async: true, n: 0, l: mpirun(0, 2), want: "set dp.rollout_ranks"},
		{async: false, n: 1, l: mpirun(0, 2), want: "needs trainer.async"},
		{async: true, n: 1, l: comm.Launch{Size: 1}, want: "a run of one process"},
		{async: true, n: 2, l: mpirun(0, 2), want: "leaves no rank to train"},
	} {
		cfg := DefaultConfig()
		cfg.Trainer.Async, cfg.DP.RolloutRanks = c.async, c.n
		err := validateRolloutRanks(&cfg, c.l)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("async %v, rollout_ranks %d, %d ranks: %v, want %q", c.async, c.n, c.l.Size, err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Trainer.Async, cfg.DP.RolloutRanks = true, 2
	for rank, want := range []int{-1, -1, 0, 1} {
		if got := rolloutRank(&cfg, mpirun(rank, 4)); got != want {
			t.Errorf("rank %d of 4 with 2 rollout ranks: rollout rank %d, want %d", rank, got, want)
		}
	}
}
