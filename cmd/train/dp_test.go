package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/metrics"
)

// The data-parallel tests run this test binary under mpirun: the parent
// writes a run's config to a YAML file, and TestDPChild, started by mpirun
// on every rank, loads it and calls run as the command would.

// dpConfig is three GRPO steps of the default from the committed warm
// start (its rewards are not all zero, so the updates are not empty), on
// a small held-out set: the tests compare runs, not their quality.
func dpConfig(t *testing.T, dir string) Config {
	t.Helper()
	ws, err := filepath.Abs(filepath.Join("testdata", "warmstart"))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Model.Path, c.SFT.Steps = ws, 0
	c.Data.SynthEval, c.Data.ValSize, c.Data.TrainBatchSize = 8, 4, 4
	c.RL.Rollout.N, c.RL.Actor.MiniBatchSize = 4, 16
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.TestFreq = 3, 1, 0
	c.Trainer.Logger = []string{"jsonl"}
	c.RL.Rollout.Slots = 16
	c.Trainer.DefaultLocalDir = dir
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// mpiRun starts np ranks of the run c and waits for them; it returns the
// combined output and the error of mpirun.
func mpiRun(t *testing.T, np int, c Config, onStart func(*exec.Cmd)) ([]byte, error) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin libopenmpi3 (.ci/run installs them)")
	}
	cfgPath := filepath.Join(t.TempDir(), "run.yaml")
	if err := saveConfig(&c, cfgPath); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--oversubscribe", "--allow-run-as-root", "-np", strconv.Itoa(np),
		os.Args[0], "-test.run", "^TestDPChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "R1GO_DP_CHILD="+cfgPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if onStart != nil {
		onStart(cmd)
	}
	err = cmd.Wait()
	return out.Bytes(), err
}

// TestDPChild is one rank of a run that mpiRun started.
func TestDPChild(t *testing.T) {
	path := os.Getenv("R1GO_DP_CHILD")
	if path == "" {
		t.Skip("a rank of the data-parallel tests, started by mpirun")
	}
	rank := os.Getenv("OMPI_COMM_WORLD_RANK")
	runConfigFile(t, path, "rank "+rank+": ")
	fmt.Printf("rank %s done\n", rank)
}

// runConfigFile runs the trainer on the config file at path, as a child
// process started by a test does; a failure's message starts with who.
func runConfigFile(t *testing.T, path, who string) {
	t.Helper()
	c := DefaultConfig()
	if err := config.Load(&c, []string{"-config", path}, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%s%v\n%s", who, err, out.String())
	}
}

// maxDiff is the largest |a-b| over two weight vectors.
func maxDiff(t *testing.T, a, b []float32) (d float64, exact bool) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d and %d parameters", len(a), len(b))
	}
	exact = true
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		exact = exact && math.Float32bits(a[i]) == math.Float32bits(b[i])
	}
	return d, exact
}

func records(t *testing.T, dir string) []metrics.Record {
	t.Helper()
	r, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Tolerances. The rollouts, the global batch, the advantages and the loss
// normaliser are the single-process ones exactly (the same sampling
// streams; the estimator runs on the gathered batch). What differs is the
// order of the float32 gradient sums: one process accumulates every token
// into one arena, two ranks each sum their half and MPI adds the halves.
// That reassociation moves a gradient by a few ulps (the gradient norms
// agree to 3e-10 relative), and AdamW's m/√v passes it on to the weights
// most where v is tiny: one update at lr 2e-4 moved weights by at most
// 6.7e-7 in a trial run. So the weights get 1e-5 (15× that, for three
// steps) and the loss-valued metrics 1e-4 relative; the data metrics
// (scores, lengths, advantages) come out equal.
const (
	weightTol = 1e-5
	metricTol = 1e-4
)

func close(a, b float64) bool { return math.Abs(a-b) <= metricTol*max(1, math.Abs(a), math.Abs(b)) }

// TestDataParallel runs the short default on one process and on two MPI
// ranks (without ZeRO, with ZeRO-1 and with ZeRO-2), resumes the two-rank
// checkpoints on one process, and kills a rank of a further run.
func TestDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer five times")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin libopenmpi3 (.ci/run installs them)")
	}
	one, two, zero := t.TempDir(), t.TempDir(), t.TempDir()
	c := dpConfig(t, one)
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if o, err := mpiRun(t, 2, dpConfig(t, two), nil); err != nil {
		t.Fatalf("mpirun: %v\n%s", err, o)
	}
	// The ZeRO-1 run stops after two steps: its last checkpoint holds the
	// optimizer state (only the newest does), which ResumeOn1Rank resumes.
	z := dpConfig(t, zero)
	z.Trainer.TotalSteps = 2
	z.DP.Zero1 = true
	z.DP.BucketMB = 0.1 // several buckets, a padded last one
	if o, err := mpiRun(t, 2, z, nil); err != nil {
		t.Fatalf("mpirun with dp.zero1: %v\n%s", err, o)
	}
	// The ZeRO-2 run likewise, with the same buckets: its step-2
	// checkpoint is resumed on one process too.
	zero2 := t.TempDir()
	z2 := dpConfig(t, zero2)
	z2.Trainer.TotalSteps, z2.DP.Zero, z2.DP.BucketMB = 2, 2, 0.1
	if o, err := mpiRun(t, 2, z2, nil); err != nil {
		t.Fatalf("mpirun with dp.zero=2: %v\n%s", err, o)
	}
	at := func(dir string, step int) []float32 {
		return params(t, filepath.Join(dir, fmt.Sprintf("global_step_%d", step), "actor"))
	}
	final := func(dir string) []float32 { return at(dir, 3) }

	t.Run("MatchesOneProcess", func(t *testing.T) {
		ra, rb := records(t, one), records(t, two)
		if len(ra) != 3 || len(rb) != 3 {
			t.Fatalf("%d and %d metric records, want 3", len(ra), len(rb))
		}
		for i := range ra {
			for _, k := range []string{"critic/score/mean", "critic/advantages/mean", "env/em", "response_length/mean",
				"perf/total_num_tokens", "num_turns/mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy"} {
				a, b := ra[i].Data[k], rb[i].Data[k]
				if _, ok := rb[i].Data[k]; !ok || !close(a, b) {
					t.Errorf("step %d %s: %v on one process, %v on two ranks", i+1, k, a, b)
				}
			}
		}
		d, exact := maxDiff(t, final(one), final(two))
		t.Logf("final weights: max |Δ| %.3g between one process and two ranks (bit-exact: %v)", d, exact)
		if d > weightTol {
			t.Errorf("final weights differ by %.3g > %g", d, weightTol)
		}
	})
	t.Run("Zero1EqualsUnsharded", func(t *testing.T) {
		d, exact := maxDiff(t, at(two, 2), at(zero, 2))
		t.Logf("step-2 weights: max |Δ| %.3g between ZeRO-1 and all-reduce (bit-exact: %v)", d, exact)
		if d > weightTol {
			t.Errorf("ZeRO-1 weights differ from the unsharded run's by %.3g", d)
		}
	})
	t.Run("Zero2EqualsZero1", func(t *testing.T) {
		// Each rank's half of a mini-batch is one micro-batch here, so
		// ZeRO-2 adds the same values in the same order as ZeRO-1.
		for step := 1; step <= 2; step++ {
			d, exact := maxDiff(t, at(zero, step), at(zero2, step))
			t.Logf("step-%d weights: max |Δ| %.3g between ZeRO-2 and ZeRO-1 (bit-exact: %v)", step, d, exact)
			if !exact {
				t.Errorf("step %d: ZeRO-2 weights differ from ZeRO-1's by %.3g", step, d)
			}
		}
		ra, rb := records(t, zero), records(t, zero2)
		for i := range ra {
			for _, k := range []string{"actor/pg_loss", "actor/grad_norm", "critic/score/mean"} {
				if ra[i].Data[k] != rb[i].Data[k] {
					t.Errorf("step %d %s: %v with ZeRO-1, %v with ZeRO-2", i+1, k, ra[i].Data[k], rb[i].Data[k])
				}
			}
		}
	})
	t.Run("Zero2ResumeOn1Rank", func(t *testing.T) {
		resumeOnOne(t, zero2, final(one), "a ZeRO-2 run of 2 ranks")
	})
	t.Run("ResumeOn1Rank", func(t *testing.T) {
		// The ZeRO-1 run's step-2 checkpoint (its optimizer state gathered
		// from the shards), resumed on one process for the third step.
		resumeOnOne(t, zero, final(one), "2 ranks")
	})
	t.Run("RankDeath", func(t *testing.T) {
		dir := t.TempDir()
		c := dpConfig(t, dir)
		c.DP.HeartbeatS = 5
		start := time.Now()
		var killed time.Time
		o, err := mpiRun(t, 2, c, func(cmd *exec.Cmd) {
			// Kill rank 1 once the run has logged its first RL step.
			for time.Since(start) < 5*time.Minute {
				if b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl")); len(b) > 0 {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			pid := rankPID(t, cmd.Process.Pid, 1)
			if pid == 0 {
				t.Error("rank 1's process was not found")
				return
			}
			killed = time.Now()
			syscall.Kill(pid, syscall.SIGKILL)
		})
		if err == nil {
			t.Fatalf("the run ended without an error after rank 1 was killed:\n%s", o)
		}
		if !strings.Contains(string(o), "rank 1 died") {
			t.Fatalf("no rank reported that rank 1 died:\n%s", o)
		}
		t.Logf("the run stopped %.1f s after rank 1 was killed", time.Since(killed).Seconds())
	})
}

// rankPID finds the process of MPI rank r among the descendants of
// mpirun's process, by its OMPI_COMM_WORLD_RANK.
func rankPID(t *testing.T, root, r int) int {
	want := []byte("OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r) + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err != nil || !bytes.Contains(env, want) || !bytes.Contains(env, []byte("R1GO_DP_CHILD=")) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(p, "stat"))
		if !bytes.Contains(stat, []byte(") S")) && !bytes.Contains(stat, []byte(") R")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		if isDescendant(pid, root) {
			return pid
		}
	}
	return 0
}

func isDescendant(pid, root int) bool {
	for pid > 1 {
		if pid == root {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return false
}

// resumeOnOne copies the run folder of a data-parallel run stopped after
// its step-2 checkpoint, resumes it in one process for the third step, and
// compares the final weights with the one-process run's (want) within
// weightTol.
func resumeOnOne(t *testing.T, src string, want []float32, what string) {
	t.Helper()
	res := t.TempDir()
	if err := os.CopyFS(res, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	c := dpConfig(t, res)
	c.Trainer.Resume = true
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "at step 2") {
		t.Fatalf("the run did not resume from step 2:\n%s", out.String())
	}
	d, exact := maxDiff(t, want, params(t, filepath.Join(res, "global_step_3", "actor")))
	t.Logf("final weights: max |Δ| %.3g between one process and %s resumed on 1 (bit-exact: %v)", d, what, exact)
	if d > weightTol {
		t.Errorf("resumed weights differ by %.3g", d)
	}
}

// TestStepModeDataParallel trains step mode (each turn a sample, the
// context a window of the last exchange) with truncated trajectories
// masked out of the loss and the verifier in drop mode, on one process and
// on two MPI ranks: the ranks pack their own trajectories' turns and the
// gathered batch is the one process's, so the runs agree as the whole
// mode's do (TestDataParallel's tolerances).
func TestStepModeDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer twice, once under mpirun")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin libopenmpi3 (.ci/run installs them)")
	}
	step := func(dir string) Config {
		c := dpConfig(t, dir)
		c.Trainer.TotalSteps = 2
		c.RL.Rollout.Trajectory, c.Env.Context.Policy, c.Env.Context.Turns = rl.TrajectoryStep, env.ContextWindow, 1
		c.RL.Rollout.TruncationLoss, c.RL.Rollout.Verify = rl.TruncationMask, rl.VerifyDrop
		c.RL.Rollout.MaxResponseTokens = 160 // the longer transcripts end at the limit: trajectories to mask
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	one, two := t.TempDir(), t.TempDir()
	c := step(one)
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if o, err := mpiRun(t, 2, step(two), nil); err != nil {
		t.Fatalf("mpirun: %v\n%s", err, o)
	}
	ra, rb := records(t, one), records(t, two)
	if len(ra) != 2 || len(rb) != 2 {
		t.Fatalf("%d and %d metric records, want 2", len(ra), len(rb))
	}
	masked := 0.0
	for i := range ra {
		for _, k := range []string{"critic/score/mean", "critic/advantages/mean", "response_length/mean",
			"perf/total_num_tokens", "rollout/truncation_masked", "actor/pg_loss", "actor/grad_norm"} {
			a, b := ra[i].Data[k], rb[i].Data[k]
			if _, ok := rb[i].Data[k]; !ok || !close(a, b) {
				t.Errorf("step %d %s: %v on one process, %v on two ranks", i+1, k, a, b)
			}
		}
		masked += ra[i].Data["rollout/truncation_masked"]
	}
	if masked == 0 {
		t.Errorf("no trajectory was masked (finish length %v, answer %v): the test does not cover truncation_loss mask",
			ra[0].Data["env/finish_length"], ra[0].Data["env/finish_answer"])
	}
	final := func(dir string) []float32 { return params(t, filepath.Join(dir, "global_step_2", "actor")) }
	if d, _ := maxDiff(t, final(one), final(two)); d > weightTol {
		t.Errorf("final weights differ by %.3g > %g", d, weightTol)
	}
}
