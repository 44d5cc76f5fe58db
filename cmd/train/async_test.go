package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/r1go/r1go/rl/metrics"
)

// TestAsyncK0IsSynchronous runs the test config synchronously, then
// asynchronously with rollout.max_staleness 0 and a rollout copy on one
// thread of its own, stopped after its step-2 checkpoint and resumed: the
// asynchronous run's final policy and every step's metrics must be the
// synchronous run's bit for bit (K = 0 trains batch v from the weights of
// version v, and a resume regenerates the rollout from the checkpoint).
func TestAsyncK0IsSynchronous(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer three times")
	}
	ctx := context.Background()
	syncDir, asyncDir := t.TempDir(), t.TempDir()
	var out bytes.Buffer
	c := testConfig(t, syncDir)
	if err := run(ctx, &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, resume := range []bool{false, true} {
		c = testConfig(t, asyncDir)
		c.Trainer.Async, c.RL.Rollout.Threads = true, 1
		if resume {
			c.Trainer.Resume = true
		} else {
			c.Trainer.StopAfter = 2
		}
		if err := run(ctx, &c, &out); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	a := params(t, filepath.Join(syncDir, "global_step_4", "actor"))
	b := params(t, filepath.Join(asyncDir, "global_step_4", "actor"))
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("parameter %d: %v synchronous, %v asynchronous", i, a[i], b[i])
		}
	}
	ra, err := metrics.ReadJSONL(filepath.Join(syncDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := metrics.ReadJSONL(filepath.Join(asyncDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ra) != 4 || len(rb) != 4 {
		t.Fatalf("%d and %d metric records, want 4 each", len(ra), len(rb))
	}
	for s := range ra {
		for _, key := range []string{"critic/score/mean", "actor/pg_loss", "actor/grad_norm", "response_length/mean"} {
			if ra[s].Data[key] != rb[s].Data[key] {
				t.Fatalf("step %d %s: %v synchronous, %v asynchronous", s+1, key, ra[s].Data[key], rb[s].Data[key])
			}
		}
		if rb[s].Data["async/age_max"] != 0 || rb[s].Data["async/version"] != float64(s) {
			t.Errorf("step %d: async/age_max %v, async/version %v", s+1, rb[s].Data["async/age_max"], rb[s].Data["async/version"])
		}
	}
}

// TestAsyncKillResume kills an asynchronous run (rollout.max_staleness 1,
// the decoupled loss, a slow search tool) with SIGKILL after its third
// step, resumes it from the step-2 checkpoint to step 6, and checks the
// staleness accounting across the kill: every step trains tokens at most
// one version old at the version of its step, and the rollout dumps show
// every question trained in one step only (in-flight trajectories were
// regenerated, none trained twice).
func TestAsyncKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer twice, once in a child process")
	}
	dir := t.TempDir()
	c := asyncConfig(t, dir)
	cfgPath := filepath.Join(t.TempDir(), "run.yaml")
	if err := saveConfig(&c, cfgPath); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAsyncChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "R1GO_ASYNC_CHILD="+cfgPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if recs, _ := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl")); len(recs) >= 3 {
			break
		}
		if time.Since(start) > 5*time.Minute {
			cmd.Process.Kill()
			t.Fatalf("the child logged no third step in 5 minutes:\n%s", out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "global_step_6")); err == nil {
		t.Fatal("the child finished before it was killed")
	}
	c = asyncConfig(t, dir)
	c.Trainer.Resume = true
	out.Reset()
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "at step 2") && !strings.Contains(out.String(), "at step 4") {
		t.Fatalf("the run did not resume from a checkpoint:\n%s", out.String())
	}
	recs, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("%d metric records, want 6", len(recs))
	}
	for s, r := range recs {
		if r.Data["async/version"] != float64(s) || r.Data["async/age_max"] > 1 {
			t.Errorf("step %d: async/version %v, async/age_max %v (bound 1)", s+1, r.Data["async/version"], r.Data["async/age_max"])
		}
	}
	seen := map[string]int{} // question → the step that trained it
	for s := 1; s <= 6; s++ {
		f, err := os.ReadFile(filepath.Join(dir, "dump", fmt.Sprintf("step_%d.jsonl", s)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(f)), "\n") {
			var rec struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[rec.ID]; ok && prev != s {
				t.Errorf("question %s trained at steps %d and %d", rec.ID, prev, s)
			}
			seen[rec.ID] = s
		}
	}
	if len(seen) < 6*c.Data.TrainBatchSize-c.Data.TrainBatchSize {
		t.Errorf("%d questions trained in 6 steps of %d", len(seen), c.Data.TrainBatchSize)
	}
}

// asyncConfig is the test config trained asynchronously with a bound of
// one version, the decoupled loss, and a fifth of the searches 30 ms
// slow, for 6 steps with a checkpoint every 2 and the rollout dump. The
// warm start is short: its demonstrations search through the slow tool
// too, and the policy's quality does not matter here.
func asyncConfig(t *testing.T, dir string) Config {
	c := testConfig(t, dir)
	c.Trainer.Async, c.RL.Rollout.MaxStaleness, c.RL.Rollout.Deterministic = true, 1, false
	c.RL.Actor.PolicyLoss = "decoupled"
	c.Env.SlowFraction, c.Env.SlowDelay = 0.2, 30*time.Millisecond
	c.SFT.Steps = 5
	c.Trainer.TotalSteps, c.Trainer.RolloutDataDir = 6, "dump"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAsyncChild is the run TestAsyncKillResume starts and kills.
func TestAsyncChild(t *testing.T) {
	path := os.Getenv("R1GO_ASYNC_CHILD")
	if path == "" {
		t.Skip("the child run of TestAsyncKillResume")
	}
	runConfigFile(t, path, "")
}
