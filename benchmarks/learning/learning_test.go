package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/isa"
	"github.com/r1go/r1go/rl/metrics"
)

// TestSmoke runs the table at CI's size (every row, 1 seed, 2 steps) and
// checks that every row that is not pending trained and reached the
// markdown. It runs two at a time on one thread each, as -jobs 2 does on
// two cores, and checks that the runs got that one thread. It trains for a
// minute or two, so it runs only when asked: .ci/run sets
// R1GO_LEARNING_SMOKE=1.
func TestSmoke(t *testing.T) {
	if os.Getenv("R1GO_LEARNING_SMOKE") == "" {
		t.Skip("set R1GO_LEARNING_SMOKE=1 to train every row for 2 steps (about 2 minutes)")
	}
	t.Chdir(filepath.Join("..", "..")) // the module root: ./cmd/train and the warm start
	out := t.TempDir()
	md := filepath.Join(out, "learning.md")
	b := &Bench{Size: SmokeSize, Out: filepath.Join(out, "runs"), Jobs: 2, Threads: 1, Log: testLog{t}}
	if err := b.Main(context.Background(), Rows, true, md, "-smoke"); err != nil {
		t.Fatal(err)
	}
	table, err := b.Collect(Rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range table {
		if rr.Row.Pending == "" && (rr.Seeds() != 1 || len(rr.Failed) > 0) {
			t.Errorf("row %q: %d results, failures %q", rr.Row.Name, rr.Seeds(), rr.Failed)
		}
		for _, r := range rr.Runs {
			if r.Steps != SmokeSize.Steps || len(r.Curve) < 2 {
				t.Errorf("row %q: %d steps, curve %v", rr.Row.Name, r.Steps, r.Curve)
			}
		}
	}
	checkMarkdown(t, md, "not yet run", "FAILED")
	log, err := os.ReadFile(filepath.Join(b.rowDir(Rows[3], 1), "train.log"))
	if err != nil || !strings.Contains(string(log), "cpu(float32, 1 threads)") {
		t.Errorf("%s run: want the device on 1 thread (GOMAXPROCS=1), log: %.300s (%v)", Rows[3].Name, log, err)
	}
	for _, png := range []string{"algorithms.png", "ablations.png"} {
		if st, err := os.Stat(filepath.Join(out, "learning", png)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", png, err)
		}
	}
	if got := recordedCPU(b.Out); got != isa.Current().String() {
		t.Errorf("table.json records CPU tier %q, want this machine's %s", got, isa.Current())
	}
	regrowWarmStart(t, b, md)
}

// regrowWarmStart removes the checkpoint of an SFT warm start, as a copy
// of the committed results lacks it, and runs again an RL row trained from
// it: the runner must train the warm start again and find it scores what
// warm.json says, and must refuse a warm start that does not.
func regrowWarmStart(t *testing.T, b *Bench, md string) {
	i := slices.IndexFunc(Rows, func(r Row) bool { sft, _ := split(r.Args); return r.Kind == RL && len(sft) > 0 })
	row := Rows[i]
	sft, _ := split(row.Args)
	dir := b.warmDir(sft, 1)
	again := func() error {
		if err := os.Remove(filepath.Join(b.rowDir(row, 1), "result.json")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(sftPolicy(dir)); err != nil {
			t.Fatal(err)
		}
		fresh := &Bench{Size: b.Size, Out: b.Out, Jobs: 1, Threads: b.Threads, Log: b.Log}
		return fresh.Main(context.Background(), []Row{row}, true, md, "-smoke")
	}
	if err := again(); err != nil {
		t.Fatalf("%s from a warm start trained again: %v", row.Name, err)
	}
	if !exists(filepath.Join(b.rowDir(row, 1), "result.json")) || !exists(filepath.Join(sftPolicy(dir), "eval.json")) {
		t.Fatalf("%s: no result, or no warm start, after training them again", row.Name)
	}
	var w WarmResult
	path := filepath.Join(dir, "warm.json")
	if err := readJSON(path, &w); err != nil {
		t.Fatal(err)
	}
	all := w.Agent["all"]
	all.EM += 0.5
	w.Agent["all"] = all
	mustWrite(t, path, &w)
	if err := again(); err == nil || !strings.Contains(err.Error(), "not the same policy") {
		t.Errorf("a warm start that scores other than its warm.json: error %v", err)
	}
}

// TestPinCPU: a runs folder keeps the CPU tier it was started at, refuses
// another, and refuses one above what this machine runs.
func TestPinCPU(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runs")
	if got, err := pinCPU(out, "", isa.AVX2); err != nil || got != "avx2" {
		t.Fatalf("a new folder on an avx2 machine: %q, %v", got, err)
	}
	if got := recordedCPU(out); got != "avx2" {
		t.Fatalf("recorded %q", got)
	}
	// An avx512 machine finishes it at avx2.
	if got, err := pinCPU(out, "", isa.AVX512); err != nil || got != "avx2" {
		t.Errorf("resumed on an avx512 machine: %q, %v", got, err)
	}
	if _, err := pinCPU(out, "generic", isa.AVX512); err == nil || !strings.Contains(err.Error(), "made at CPU tier avx2") {
		t.Errorf("another tier asked for: %v", err)
	}
	if _, err := pinCPU(out, "", isa.Generic); err == nil || !strings.Contains(err.Error(), "above this machine's generic") {
		t.Errorf("resumed on a machine without avx2: %v", err)
	}
	other := filepath.Join(t.TempDir(), "runs")
	if got, err := pinCPU(other, "generic", isa.AVX512); err != nil || got != "generic" || recordedCPU(other) != "generic" {
		t.Errorf("a new folder asking for generic: %q, %v", got, err)
	}
	if _, err := pinCPU(filepath.Join(t.TempDir(), "x"), "native", isa.AVX512); err == nil {
		t.Errorf("-cpu native accepted: a folder records a tier, not a machine's best")
	}
	mustWriteText(t, filepath.Join(other, tableFile), "{")
	if _, err := pinCPU(other, "", isa.AVX512); err == nil || !strings.Contains(err.Error(), tableFile) {
		t.Errorf("a corrupt table.json: %v", err)
	}
}

// TestMachines: the header lists each machine, and each commit, once with
// its runs, a warm start shared by several rows counted once.
func TestMachines(t *testing.T) {
	w := &WarmResult{EvalCommand: "eval seed 1", Machine: "A"}
	table := []RowResults{
		{Warm: []*WarmResult{w}},
		{Warm: []*WarmResult{w}},
		{Runs: []*RunResult{{Machine: "B"}, {Machine: "B"}, {Machine: "A"}}},
	}
	if got, want := machines(table), "A (2 runs); B (2 runs)"; got != want {
		t.Errorf("machines = %q, want %q", got, want)
	}
	table[2].Runs[0].Commit, table[2].Runs[1].Commit, w.Commit = "c2", "c2", "c1"
	if got, want := commits(table), "c2 (2 runs); c1 (1 run); unrecorded (1 run)"; got != want {
		t.Errorf("commits = %q, want %q", got, want)
	}
	if got, want := commits(nil), "unrecorded"; got != want {
		t.Errorf("commits of no runs = %q, want %q", got, want)
	}
}

// TestRunThreads checks how the cores are shared out among runs at once.
func TestRunThreads(t *testing.T) {
	for _, c := range []struct{ asked, jobs, cores, want int }{
		{0, 1, 2, 0},  // one run: every core, as cmd/train picks
		{0, 2, 2, 1},  // two runs on two cores: one each
		{0, 4, 16, 4}, // a GPU box's CPU
		{0, 3, 2, 1},  // more runs than cores: still one each
		{2, 4, 2, 2},  // asked for: kept
	} {
		if got := runThreads(c.asked, c.jobs, c.cores); got != c.want {
			t.Errorf("runThreads(%d, %d jobs, %d cores) = %d, want %d", c.asked, c.jobs, c.cores, got, c.want)
		}
	}
}

// TestRender renders a table from made-up result files: finished, failed,
// unfinished and pending rows, and the mean ± std of two seeds.
func TestRender(t *testing.T) {
	out := t.TempDir()
	size := Size{Seeds: 2, Steps: 4, TestFreq: 2, SynthEval: 10, ValSize: 5, SFTSteps: 3}
	b := &Bench{Size: size, Out: out}
	grpo, rloo, ppo := Rows[3], Rows[7], Rows[4]
	warm := &WarmResult{Agent: Results{"all": {EM: 0.1, ToolCalls: 1}}, NaiveRAG: Results{"all": {EM: 0.05}}, ValEM: 0.1, EvalCommand: "eval"}
	for seed := 1; seed <= 2; seed++ {
		mustWrite(t, filepath.Join(out, "warm", "default", "seed"+string(rune('0'+seed)), "warm.json"), warm)
		res := &RunResult{Steps: 4, PeakStep: 2 * seed, PeakVal: 0.2 + 0.1*float64(seed),
			Curve:   []metrics.Point{{Step: 0, Value: 0.1}, {Step: 2, Value: 0.3}, {Step: 4, Value: 0.2 + 0.1*float64(seed)}},
			Final:   Results{"all": {EM: 0.2 * float64(seed), ToolCalls: 2}, hops[2]: {EM: 0.1}},
			Best:    Results{"all": {EM: 0.3}},
			Wall:    60 * float64(seed),
			Command: "train " + grpo.Name}
		mustWrite(t, filepath.Join(b.rowDir(grpo, seed), "result.json"), res)
	}
	mustWrite(t, filepath.Join(b.rowDir(rloo, 1), "result.json"), &RunResult{Steps: 4, Final: Results{"all": {EM: 0.5}}, Best: Results{"all": {EM: 0.5}}})
	if err := os.MkdirAll(b.rowDir(ppo, 1), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.rowDir(ppo, 1), "error.txt"), []byte("train: exit status 1\nmore\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A row the trainer cannot express yet is listed with its reason.
	rows := append(slices.Clone(Rows), Row{Name: "a pending ablation", Group: groupAblation, Pending: "cmd/train has no key for it"})
	table, err := b.Collect(rows)
	if err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(out, "learning.md")
	mustWriteText(t, filepath.Join(out, "learning", "notes.md"), "A finding.\n")
	stale := filepath.Join(out, "learning", "ablations.png") // from runs this table no longer holds
	mustWriteText(t, stale, "old plot")
	if err := Render(md, table, size, RenderInfo{Command: "go run ./benchmarks/learning", Jobs: 1, CPU: "avx2"}); err != nil {
		t.Fatal(err)
	}
	text := checkMarkdown(t, md)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the plot of a section with no finished run stays: %v", err)
	}
	for _, want := range []string{
		"| GRPO | 0.300 ± 0.141 | — | 0.000 ± 0.000 | 0.000 ± 0.000 | 0.100 ± 0.000 | 2.00 ± 0.00 | 0.350 ± 0.071 (3 ± 1) | 0.300 ± 0.000 | 2 | 1m30s |",
		"| RLOO | 0.500 | +0.300 |", // seed 1 alone: 0.5 - 0.2
		"| 1 of 2 |",
		"| PPO (GAE, critic) | FAILED: seed 1: train: exit status 1 |",
		"| REINFORCE++ | not yet run |",
		"| Naive RAG (one retrieval, then answer) | 0.050 ± 0.000 | −0.250 ± 0.141 |", // 0.05 - 0.2, 0.05 - 0.4
		"| a pending ablation | not run: cmd/train has no key for it |",
		"## How the default was chosen\n\nOptional rows: the full table leaves them out; `-all` (or `-rows`) runs them.\n",
		"| GRPO from 600 SFT steps (the previous default) | not run (optional) |",
		"![validation EM by step on all questions, algorithms](learning/algorithms.png)",
		"## Notes\n\nA finding.\n",
		"- CPU tier: avx2, every run",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("markdown lacks %q:\n%s", want, text)
		}
	}
}

// TestCommonSeeds: a section's plot averages over the seeds every row
// with a finished run has, not over each row's own.
func TestCommonSeeds(t *testing.T) {
	rows := []RowResults{
		{Runs: make([]*RunResult, 3), seeds: []int{1, 2, 3}},
		{}, // no run yet: does not narrow the others
		{Runs: make([]*RunResult, 2), seeds: []int{3, 1}},
	}
	if got := commonSeeds(rows); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("common seeds %v, want [1 3]", got)
	}
	rows = append(rows, RowResults{Runs: make([]*RunResult, 1), seeds: []int{2}})
	if got := commonSeeds(rows); len(got) != 0 {
		t.Errorf("rows sharing no seed: common seeds %v", got)
	}
}

// TestSelectRows: the full table runs every row that is not optional,
// -all every row, and -rows the rows it names (by a part of the name, or
// the whole after "="), optional or not.
func TestSelectRows(t *testing.T) {
	names := func(rows []Row) (out []string) {
		for _, r := range rows {
			out = append(out, r.Name)
		}
		return out
	}
	var want []string
	nOptional := 0
	for _, r := range Rows {
		if r.Optional {
			nOptional++
			if r.Group != groupChosen {
				t.Errorf("optional row %q outside the optional section", r.Name)
			}
		} else {
			want = append(want, r.Name)
		}
	}
	if nOptional == 0 || len(want) == 0 {
		t.Fatalf("%d optional rows of %d", nOptional, len(Rows))
	}
	if got := names(selectRows(Rows, "", false)); !slices.Equal(got, want) {
		t.Errorf("full table runs %q, want %q", got, want)
	}
	if got := selectRows(Rows, "", true); len(got) != len(Rows) {
		t.Errorf("-all runs %d rows of %d", len(got), len(Rows))
	}
	if got := names(selectRows(Rows, "=GRPO", false)); !slices.Equal(got, []string{referenceRow}) {
		t.Errorf("-rows =GRPO runs %q", got)
	}
	got := names(selectRows(Rows, "600 SFT,RLOO", false))
	if !slices.Equal(got, []string{"RLOO", "GRPO from 600 SFT steps (the previous default)"}) {
		t.Errorf("-rows '600 SFT,RLOO' runs %q", got)
	}
}

// checkMarkdown reads md, checks that it names every row and holds none of
// the forbidden strings, and returns it.
func checkMarkdown(t *testing.T, md string, forbidden ...string) string {
	t.Helper()
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, r := range Rows {
		if !strings.Contains(text, "| "+r.Name+" |") {
			t.Errorf("markdown has no row %q", r.Name)
		}
	}
	for _, f := range forbidden {
		if strings.Contains(text, f) {
			t.Errorf("markdown holds %q:\n%s", f, text)
		}
	}
	return text
}

func mustWrite(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(path, v); err != nil {
		t.Fatal(err)
	}
}

func mustWriteText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testLog sends the bench's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testLog{}

// TestWarmPolicy checks where each warm start comes from: Init for every
// seed, Seed1 for the default's seed 1 only, SFT otherwise.
func TestWarmPolicy(t *testing.T) {
	full := &Bench{Size: Size{Seed1: "ws"}, Out: "o"}
	smoke := &Bench{Size: Size{Init: "init"}, Out: "o"}
	for _, c := range []struct {
		b          *Bench
		sft        []string
		seed       int
		policy     string
		sameAsSeed int
	}{
		{full, nil, 1, "ws", 1},
		{full, nil, 2, "", 2},
		{full, []string{gold}, 1, "", 1},
		{smoke, nil, 3, "init", 0},
		{smoke, []string{gold}, 3, "", 3},
	} {
		p, s := c.b.warmPolicy(c.sft, c.seed)
		if p != c.policy || s != c.sameAsSeed {
			t.Errorf("warmPolicy(%v, %d) = %q, %d; want %q, %d", c.sft, c.seed, p, s, c.policy, c.sameAsSeed)
		}
	}
}

// TestSFTSteps: the last sft.steps of a command line counts, so the
// smoke's cap reads what a row's override asked for.
func TestSFTSteps(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"sft.steps=600", "data.seed=1"}, 600},
		{append([]string{"sft.steps=2"}, short...), 400},
		{[]string{"sft.steps=600", "sft.steps=x"}, 600},
	} {
		if got := sftSteps(c.args); got != c.want {
			t.Errorf("sftSteps(%v) = %d, want %d", c.args, got, c.want)
		}
	}
}

func TestSFTSeconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sft.log")
	log := "data: 3000 train\nsft step 20/400: loss 1.4784, grad norm 0.523, lr 3.00e-03 (101 s)\n" +
		"sft step 400/400: loss 0.1, grad norm 0.6, lr 3.00e-03 (1226 s)\nheld-out: ...\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := sftSeconds(path); s != 1226 {
		t.Errorf("sftSeconds = %v, want 1226", s)
	}
}

// TestClaim checks that a run folder claimed by a live process is not
// claimed again, and that a dead process's claim is taken over.
func TestClaim(t *testing.T) {
	dir := t.TempDir()
	release, ok, err := claim(dir)
	if err != nil || !ok {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if _, ok, err := claim(dir); err != nil || ok {
		t.Fatalf("second claim while the first holds: %v, %v", ok, err)
	}
	release()
	// A pid no process has (above the kernel's pid_max).
	mustWriteText(t, filepath.Join(dir, "claim"), "99999999\n")
	release, ok, err = claim(dir)
	if err != nil || !ok {
		t.Fatalf("claim over a dead process's: %v, %v", ok, err)
	}
	release()
}
