package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/metrics"
)

func nop(string) {}

// A folder with checkpoints is refused without trainer.resume, before any
// work (the config is untouched and no SFT runs), and the error says what
// to do; overwrite wipes the run's files and keeps the user's.
func TestRunFolderHoldingCheckpointsNeedsResume(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"global_step_2", "global_step_4", "sft"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"metrics.jsonl": `{"step":1,"data":{}}` + "\n", "config.yaml": "old: 1\n", "notes.txt": "mine\n"} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	c := testConfig(t, dir)
	var out bytes.Buffer
	err := run(context.Background(), &c, &out)
	if err == nil {
		t.Fatal("run started over a folder holding checkpoints")
	}
	for _, want := range []string{"global_step_4", "trainer.resume=true", "trainer.overwrite=true", "trainer.default_local_dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); string(raw) != "old: 1\n" {
		t.Errorf("the refused run rewrote config.yaml: %q", raw)
	}
	if _, err := os.Stat(filepath.Join(dir, lockName)); err == nil {
		t.Error("the refused run left its lock behind")
	}

	rel, err := claimRunFolder(dir, true, false, nop)
	if err != nil {
		t.Fatalf("resume refused: %v", err)
	}
	rel()
	if _, err := claimRunFolder(dir, true, true, nop); err == nil {
		t.Error("resume and overwrite together were accepted")
	}
	var notes []string
	rel, err = claimRunFolder(dir, false, true, func(s string) { notes = append(notes, s) })
	if err != nil {
		t.Fatal(err)
	}
	rel()
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"notes.txt"}) {
		t.Errorf("after overwrite the folder holds %v, want only the user's notes.txt", left)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "removed the earlier run's 2 checkpoints") {
		t.Errorf("overwrite notes %q", notes)
	}
}

// A live lock keeps a second trainer out; a dead process's lock is taken
// over; another host's lock is refused with the file to delete.
func TestRunFolderLock(t *testing.T) {
	dir := t.TempDir()
	rel, err := claimRunFolder(dir, false, false, nop)
	if err != nil {
		t.Fatal(err)
	}
	var info lockInfo
	raw, _ := os.ReadFile(filepath.Join(dir, lockName))
	if err := json.Unmarshal(raw, &info); err != nil || info.PID != os.Getpid() || info.Host == "" {
		t.Fatalf("run.lock holds %q (%v)", raw, err)
	}
	if _, err := claimRunFolder(dir, false, false, nop); err == nil || !strings.Contains(err.Error(), "in use by another trainer") {
		t.Fatalf("second trainer: %v", err)
	}
	rel()
	rel() // twice is harmless
	if _, err := os.Stat(filepath.Join(dir, lockName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("release left the lock: %v", err)
	}

	// A process that has exited: its pid is free (or reused much later).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true command:", err)
	}
	host, _ := os.Hostname()
	stale, _ := json.Marshal(lockInfo{PID: cmd.Process.Pid, Host: host, Started: "2026-01-01T00:00:00Z"})
	os.WriteFile(filepath.Join(dir, lockName), stale, 0o644)
	var notes []string
	rel, err = claimRunFolder(dir, false, false, func(s string) { notes = append(notes, s) })
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "stale lock") {
		t.Errorf("notes %q", notes)
	}
	rel()

	other, _ := json.Marshal(lockInfo{PID: 1, Host: host + "-elsewhere", Started: "2026-01-01T00:00:00Z"})
	os.WriteFile(filepath.Join(dir, lockName), other, 0o644)
	if _, err := claimRunFolder(dir, false, false, nop); err == nil || !strings.Contains(err.Error(), "-elsewhere") {
		t.Fatalf("another host's lock: %v", err)
	}
}

// On resume metrics.jsonl keeps the steps up to the checkpoint only, and a
// half-written last line goes too.
func TestTruncateMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	j, err := metrics.CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 5; s++ {
		if err := j.Log(s, map[string]float64{"x": float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":6,"da`)
	f.Close()
	n, err := truncateMetrics(path, 3)
	if err != nil || n != 3 {
		t.Fatalf("dropped %d (%v), want 3", n, err)
	}
	recs, err := metrics.ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	if !slices.Equal(steps, []int{1, 2, 3}) {
		t.Fatalf("steps %v after truncation, want [1 2 3]", steps)
	}
	if n, err := truncateMetrics(filepath.Join(t.TempDir(), "none.jsonl"), 3); n != 0 || err != nil {
		t.Fatalf("missing file: %d, %v", n, err)
	}
}

// checkStep stops on a non-finite loss, gradient norm or weight, naming
// it and the last good checkpoint.
func TestCheckStepNonFinite(t *testing.T) {
	run := t.TempDir()
	os.MkdirAll(filepath.Join(run, "global_step_10"), 0o755)
	os.MkdirAll(filepath.Join(run, "global_step_20"), 0o755)
	m, err := model.Load("testdata/warmstart", cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*model.Model{"actor": m}
	good := rl.Metrics{"actor/pg_loss": 0.1, "actor/grad_norm": 2}
	if err := checkStep(21, good, run, models); err != nil {
		t.Fatalf("finite step refused: %v", err)
	}
	for _, key := range []string{"actor/pg_loss", "actor/grad_norm", "critic/vf_loss"} {
		bad := rl.Metrics{"actor/pg_loss": 0.1, "actor/grad_norm": 2}
		bad[key] = math.NaN()
		err := checkStep(21, bad, run, models)
		if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), filepath.Join(run, "global_step_20")) {
			t.Errorf("%s NaN: %v", key, err)
		}
	}
	host := make([]float32, m.NumParams())
	m.Dev.Download(host, m.Params)
	ts := m.Tensors()
	off := 0
	for _, s := range ts[:2] {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		off += n
	}
	host[off+5] = float32(math.Inf(1))
	m.Dev.Upload(m.Params, host)
	err = checkStep(21, good, run, models)
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), ts[2].Name) || !strings.Contains(err.Error(), "flat index 5") {
		t.Errorf("Inf weight in %s: %v", ts[2].Name, err)
	}
	if err := checkStep(1, rl.Metrics{"actor/grad_norm": math.Inf(1)}, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "No RL checkpoint") {
		t.Errorf("no checkpoint yet: %v", err)
	}
}

// A run whose updates blow the weights up stops at that step without a
// checkpoint of it.
func TestDivergedRunIsNotCheckpointed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.SFT.Steps = 0
	c.Trainer.TotalSteps, c.Trainer.SaveFreq = 3, 1
	// AdamW's first step moves each weight by about lr; 1e39 is beyond
	// float32, so the weights become infinite at step 1.
	c.RL.Actor.Optim.LR = 1e39
	var out bytes.Buffer
	err := run(context.Background(), &c, &out)
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "at step 1:") {
		t.Fatalf("run did not stop as diverged at step 1: %v\n%s", err, out.String())
	}
	if steps, _ := checkpointSteps(dir); len(steps) > 0 {
		t.Fatalf("checkpoints %v of a run that diverged at step 1", steps)
	}
	if _, err := os.Stat(filepath.Join(dir, lockName)); err == nil {
		t.Error("the stopped run left its lock")
	}
}

func TestEntropyCollapseWarning(t *testing.T) {
	w := entropyWatch{threshold: 0.1, steps: 3}
	var fired []int
	for step, e := range []float64{0.5, 0.05, 0.04, 0.2, 0.05, 0.01, 0.02, 0.01, 0.0} {
		if msg := w.observe(step+1, e); msg != "" {
			fired = append(fired, step+1)
			if !strings.Contains(msg, "entropy collapse") || !strings.Contains(msg, "3 steps") {
				t.Errorf("message %q", msg)
			}
		}
	}
	if !slices.Equal(fired, []int{7}) {
		t.Fatalf("warned at steps %v, want [7] (three below 0.1 in a row once)", fired)
	}
	off := entropyWatch{threshold: 0.1, steps: 0}
	if off.observe(1, 0) != "" {
		t.Error("entropy_collapse_steps=0 warned")
	}
	// Without the loss's entropy metric, the sampled tokens' mean negative
	// log-probability stands in.
	tr := &rl.Trajectory{Action: []bool{false, true, true, false}, LogProb: []float32{0, -0.5, -1.5, 0}}
	if got := stepEntropy(rl.Metrics{}, []*rl.Trajectory{tr}); got != 1 {
		t.Errorf("stepEntropy %v, want 1", got)
	}
}

// FuzzTruncateMetrics: whatever the file holds, the cut keeps only whole
// records of steps up to the checkpoint, in their order, and never panics.
func FuzzTruncateMetrics(f *testing.F) {
	f.Add([]byte("{\"step\":1,\"data\":{}}\n{\"step\":3,\"data\":{}}\n{\"step\":2,\"data\":{\"x\":1}}\n"), 2)
	f.Add([]byte("{\"step\":1}\n{\"ste"), 5)
	f.Add([]byte("\n\n{\"data\":{}}\n"), 0)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte, upTo int) {
		path := filepath.Join(dir, "metrics.jsonl")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := truncateMetrics(path, upTo); err != nil {
			return
		}
		raw, _ := os.ReadFile(path)
		for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var rec struct {
				Step *int `json:"step"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Step == nil || *rec.Step > upTo {
				if string(raw) == string(body) {
					// Nothing was dropped: the file is left as it was only
					// when every record already passes.
					t.Fatalf("kept line %q of an untouched file (upTo %d)", line, upTo)
				}
				t.Fatalf("kept line %q (upTo %d)", line, upTo)
			}
		}
	})
}

// BenchmarkNonFiniteWeight scans the warm-start policy's weights; the
// denominator, BenchmarkDownloadWeights, only copies them to the host.
func BenchmarkNonFiniteWeight(b *testing.B) {
	m, err := model.Load("testdata/warmstart", cpu.New(), model.LMHeadOutput)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * m.NumParams()))
	for b.Loop() {
		if msg := nonFiniteWeight(m); msg != "" {
			b.Fatal(msg)
		}
	}
}

func BenchmarkDownloadWeights(b *testing.B) {
	m, err := model.Load("testdata/warmstart", cpu.New(), model.LMHeadOutput)
	if err != nil {
		b.Fatal(err)
	}
	host := make([]float32, m.NumParams())
	b.SetBytes(int64(4 * m.NumParams()))
	for b.Loop() {
		m.Dev.Download(host, m.Params)
	}
}
