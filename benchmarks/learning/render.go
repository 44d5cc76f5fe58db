package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/r1go/r1go/rl/metrics"
)

// RowResults is what the table shows of a row: its results at each seed
// that finished, and why the others did not.
type RowResults struct {
	Row    Row
	Warm   []*WarmResult // baselines: one per seed
	Runs   []*RunResult  // RL rows: one per finished seed
	Failed []string      // "seed N: first line of error.txt"
	seeds  []int         // the seed of each of Warm or Runs
}

// Collect reads every row's results under Out; it trains nothing.
func (b *Bench) Collect(rows []Row) ([]RowResults, error) {
	var table []RowResults
	for _, r := range rows {
		rr := RowResults{Row: r}
		for seed := 1; seed <= b.Size.Seeds && r.Pending == ""; seed++ {
			if r.Kind != RL {
				sft, _ := split(r.Args)
				_, s := b.warmPolicy(sft, seed)
				var w WarmResult
				if readJSON(filepath.Join(b.warmDir(sft, s), "warm.json"), &w) == nil {
					rr.Warm, rr.seeds = append(rr.Warm, &w), append(rr.seeds, seed)
				}
				continue
			}
			dir := b.rowDir(r, seed)
			var res RunResult
			if err := readJSON(filepath.Join(dir, "result.json"), &res); err == nil {
				rr.Runs, rr.seeds = append(rr.Runs, &res), append(rr.seeds, seed)
			} else if msg, err := os.ReadFile(filepath.Join(dir, "error.txt")); err == nil {
				rr.Failed = append(rr.Failed, fmt.Sprintf("seed %d: %s", seed, strings.SplitN(string(msg), "\n", 2)[0]))
			}
		}
		table = append(table, rr)
	}
	return table, nil
}

// Seeds is the number of seeds that produced the row's figures.
func (rr RowResults) Seeds() int { return len(rr.Warm) + len(rr.Runs) }

// meanStd formats the mean and sample standard deviation of xs as
// "0.400 ± 0.020" (one value: the value alone; none: "").
func meanStd(xs []float64, prec int) string {
	if len(xs) == 0 {
		return ""
	}
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	if len(xs) == 1 {
		return fmt.Sprintf("%.*f", prec, m)
	}
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, m, prec, math.Sqrt(v/float64(len(xs)-1)))
}

// column gathers one figure over a row's seeds.
func (rr RowResults) column(f func(Results) float64, best bool) []float64 {
	var xs []float64
	for _, w := range rr.Warm {
		r := w.Agent
		if rr.Row.Kind == NaiveRAG {
			r = w.NaiveRAG
		}
		xs = append(xs, f(r))
	}
	for _, run := range rr.Runs {
		r := run.Final
		if best {
			r = run.Best
		}
		xs = append(xs, f(r))
	}
	return xs
}

// paired formats the row's held-out EM less the reference row's at the
// same seeds, mean ± sample std over the seeds both finished. Rows at one
// seed share its warm start, whose seed moves every row together (the
// spread of a row's own EM is mostly the warm start's): the difference
// holds that fixed and shows what the row's change did.
func paired(rr, ref RowResults) string {
	if rr.Row.Name == ref.Row.Name {
		return "—"
	}
	refEM := map[int]float64{}
	for i, x := range ref.column(em("all"), false) {
		refEM[ref.seeds[i]] = x
	}
	var d []float64
	for i, x := range rr.column(em("all"), false) {
		if y, ok := refEM[rr.seeds[i]]; ok {
			d = append(d, x-y)
		}
	}
	if len(d) == 0 {
		return "—"
	}
	m := meanStd(d, 3)
	if strings.HasPrefix(m, "-") {
		return "−" + m[1:]
	}
	return "+" + m
}

func em(src string) func(Results) float64 {
	return func(r Results) float64 { return r[src].EM }
}

func toolCalls(r Results) float64 { return r["all"].ToolCalls }

// RenderInfo is what the markdown says about how it was made.
type RenderInfo struct {
	Command string
	Jobs    int
	Threads int    // each run's (0: every core)
	CPU     string // the tier every run is made at (pinCPU)
}

// Render writes the table to md and one learning-curve plot per section of
// RL rows to the folder named after md (learning.md: learning/NAME.png).
func Render(md string, table []RowResults, size Size, info RenderInfo) error {
	plotDir := strings.TrimSuffix(md, filepath.Ext(md))
	if err := os.MkdirAll(plotDir, 0o755); err != nil {
		return err
	}
	var w bytes.Buffer
	fmt.Fprintf(&w, "# Learning table\n\n")
	fmt.Fprintf(&w, "Every row is trained on the embedded synthetic world by `%s` (package `benchmarks/learning`), "+
		"which runs `cmd/train` and `cmd/eval` with the overrides in each row's command line (listed at the end). "+
		"The command resumes where it stopped; `-rows` and `-seed` make the table in pieces and `-render` rewrites "+
		"this file from the runs. A row is a name and key=value overrides in `benchmarks/learning/rows.go`. "+
		"The runs' result files are committed in `benchmarks/learning/runs`, the default runs folder, so that on a fresh clone "+
		"the command renders this table and trains only what it lacks (a new row, a missing seed), at the table's CPU tier.\n\n", info.Command)
	threads := "every core"
	if info.Threads > 0 {
		threads = fmt.Sprintf("%d thread(s)", info.Threads)
	}
	fmt.Fprintf(&w, "- date: %s\n- machine: %s\n- CPU tier: %s, every run (R1GO_CPU; the runs folder's %s pins it, so that any machine with it can finish the table)\n"+
		"- code: %s; rendered at %s\n- runs at once: %d, each on %s (wall times are per run at that load, "+
		"on a machine shared with other work: compare them within one table only)\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machines(table), cmp.Or(info.CPU, "unrecorded"), tableFile,
		commits(table), checkout(md, filepath.Join(plotDir, "*.png")), info.Jobs, threads)
	fmt.Fprintf(&w, "- size: %d seed(s) per row, %d RL steps, a validation point every %d steps on %d questions, "+
		"%d held-out test questions, warm start %s\n\n", size.Seeds, size.Steps, size.TestFreq, size.ValSize, size.SynthEval, warmSource(size))
	fmt.Fprintf(&w, "Columns: held-out exact match after the last step (all questions, then per hop count), "+
		"tool calls per question, the validation peak (EM and the step where it was reached, step 0 being the warm start), "+
		"and the held-out EM of the checkpoint saved at that peak: the run keeps its best checkpoint, selected on validation, "+
		"not on the test questions. Figures are mean ± sample std over the seeds that finished; "+
		"Δ is the row's held-out EM less that of "+referenceRow+" at the same seed (the same warm start), "+
		"mean ± std over the seeds both finished: the seed of the warm start moves every row together, "+
		"so a row's own spread is mostly the warm start's and Δ is what the row's change did; "+
		"wall is the mean time of one run (training with its evaluations).\n\n")
	var ref RowResults
	for _, rr := range table {
		if rr.Row.Name == referenceRow {
			ref = rr
		}
	}
	for _, g := range []string{groupBaseline, groupAlgorithm, groupAblation, groupFeature, groupChosen} {
		var rows []RowResults
		for _, rr := range table {
			if rr.Row.Group == g {
				rows = append(rows, rr)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&w, "## %s\n\n", strings.ToUpper(g[:1])+g[1:])
		if optional(rows) {
			fmt.Fprintf(&w, "Optional rows: the full table leaves them out; `-all` (or `-rows`) runs them.\n\n")
		}
		fmt.Fprintf(&w, "| row | held-out EM | Δ, same seed | 2-hop | 3-hop | 4-hop | tool calls | val peak (step) | EM at peak ckpt | seeds | wall |\n")
		fmt.Fprintf(&w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, rr := range rows {
			writeRow(&w, rr, ref, size)
		}
		fmt.Fprintln(&w)
		if g == groupBaseline {
			continue
		}
		for _, c := range []struct {
			suffix, what string
			curve        func(*RunResult) []metrics.Point
		}{
			{"", "all questions", func(r *RunResult) []metrics.Point { return r.Curve }},
			{"-4hop", "4-hop questions", func(r *RunResult) []metrics.Point { return r.Curve4 }},
		} {
			name := slug(g) + c.suffix + ".png"
			path := filepath.Join(plotDir, name)
			if ok, err := plotGroup(path, c.what, g, rows, c.curve); err != nil {
				return err
			} else if ok {
				fmt.Fprintf(&w, "![validation EM by step on %s, %s](%s/%s)\n\n", c.what, g, filepath.Base(plotDir), name)
			} else if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err // a plot of runs the table no longer holds would stay beside it
			}
		}
	}
	if notes, err := os.ReadFile(filepath.Join(plotDir, "notes.md")); err == nil {
		fmt.Fprintf(&w, "## Notes\n\n%s\n\n", bytes.TrimSpace(notes))
	}
	writeCommands(&w, table)
	return os.WriteFile(md, w.Bytes(), 0o644)
}

func writeRow(w *bytes.Buffer, rr, ref RowResults, size Size) {
	if rr.Row.Pending != "" {
		fmt.Fprintf(w, "| %s | not run: %s ||||||||||\n", rr.Row.Name, rr.Row.Pending)
		return
	}
	if rr.Seeds() == 0 {
		state := "not yet run"
		if rr.Row.Optional {
			state = "not run (optional)"
		}
		if len(rr.Failed) > 0 {
			state = "FAILED: " + strings.Join(rr.Failed, "; ")
		}
		fmt.Fprintf(w, "| %s | %s ||||||||||\n", rr.Row.Name, state)
		return
	}
	peak, atPeak := "—", "—"
	var walls []float64
	for _, x := range rr.Warm {
		walls = append(walls, x.Wall)
	}
	if len(rr.Runs) > 0 {
		var pv, ps []float64
		walls = walls[:0]
		for _, r := range rr.Runs {
			pv, ps = append(pv, r.PeakVal), append(ps, float64(r.PeakStep))
			walls = append(walls, r.Wall)
		}
		peak = fmt.Sprintf("%s (%s)", meanStd(pv, 3), meanStd(ps, 0))
		atPeak = meanStd(rr.column(em("all"), true), 3)
	}
	seeds := fmt.Sprintf("%d", rr.Seeds())
	if rr.Seeds() < size.Seeds {
		seeds += fmt.Sprintf(" of %d", size.Seeds)
	}
	if len(rr.Failed) > 0 {
		seeds += " (FAILED " + strings.Join(rr.Failed, "; ") + ")"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rr.Row.Name,
		meanStd(rr.column(em("all"), false), 3), paired(rr, ref), meanStd(rr.column(em(hops[0]), false), 3),
		meanStd(rr.column(em(hops[1]), false), 3), meanStd(rr.column(em(hops[2]), false), 3),
		meanStd(rr.column(toolCalls, false), 2), peak, atPeak, seeds, wall(walls))
}

// optional says whether every row of a section is optional.
func optional(rows []RowResults) bool {
	for _, rr := range rows {
		if !rr.Row.Optional {
			return false
		}
	}
	return len(rows) > 0
}

// wall formats the mean of seconds as minutes and seconds.
func wall(secs []float64) string {
	if len(secs) == 0 {
		return ""
	}
	m := 0.0
	for _, s := range secs {
		m += s
	}
	d := time.Duration(m / float64(len(secs)) * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// writeCommands lists the command line of each row's first finished seed.
func writeCommands(w *bytes.Buffer, table []RowResults) {
	fmt.Fprintf(w, "## Commands\n\nThe first seed's command of each row (the others differ in the seeds); "+
		"paths are under the runs folder (`-out`).\n\n")
	for _, rr := range table {
		switch {
		case len(rr.Runs) > 0:
			fmt.Fprintf(w, "- %s: `%s`\n", rr.Row.Name, rr.Runs[0].Command)
		case len(rr.Warm) > 0:
			if c := rr.Warm[0].SFTCommand; c != "" {
				fmt.Fprintf(w, "- %s: `%s`, then `%s`\n", rr.Row.Name, c, rr.Warm[0].EvalCommand)
			} else {
				fmt.Fprintf(w, "- %s: `%s`\n", rr.Row.Name, rr.Warm[0].EvalCommand)
			}
		}
	}
	fmt.Fprintln(w)
}

// plotGroup draws the mean of a validation curve of each RL row of a
// section by step; ok is false when no row of it has finished. The means
// are over the seeds every finished row has, so that a row further along
// than another is not drawn against it over other warm starts (over each
// row's own seeds when the rows share none).
func plotGroup(path, what, group string, rows []RowResults, curve func(*RunResult) []metrics.Point) (ok bool, err error) {
	seeds := "each row's own seeds"
	common := commonSeeds(rows)
	if len(common) > 0 {
		var ss []string
		for _, s := range common {
			ss = append(ss, fmt.Sprint(s))
		}
		seeds = "seed " + strings.Join(ss, ", ")
		if len(ss) > 1 {
			seeds = "seeds " + strings.Join(ss, ", ")
		}
	}
	title := fmt.Sprintf("validation EM (greedy) on %s, mean over %s: %s", what, seeds, group)
	c := metrics.Chart{Title: title, YLabel: "exact match", Series: map[string][]metrics.Point{}}
	for _, rr := range rows {
		sum, n := map[int]float64{}, map[int]int{}
		for i, r := range rr.Runs {
			if len(common) > 0 && !slices.Contains(common, rr.seeds[i]) {
				continue
			}
			for _, p := range curve(r) {
				sum[p.Step] += p.Value
				n[p.Step]++
			}
		}
		var pts []metrics.Point
		for s, v := range sum {
			pts = append(pts, metrics.Point{Step: s, Value: v / float64(n[s])})
		}
		if len(pts) > 0 {
			c.Series[rr.Row.Name] = pts
		}
	}
	if len(c.Series) == 0 {
		return false, nil
	}
	return true, metrics.Plot(path, c)
}

// commonSeeds lists, in order, the seeds every RL row of rows that has
// finished a run has finished.
func commonSeeds(rows []RowResults) []int {
	var common []int
	first := true
	for _, rr := range rows {
		if len(rr.Runs) == 0 {
			continue
		}
		if first {
			common, first = slices.Sorted(slices.Values(rr.seeds)), false
			continue
		}
		common = slices.DeleteFunc(common, func(s int) bool { return !slices.Contains(rr.seeds, s) })
	}
	return common
}

func warmSource(s Size) string {
	if s.Init != "" {
		return fmt.Sprintf("`%s` (gold rows: %d SFT steps from it)", s.Init, s.SFTSteps)
	}
	w := fmt.Sprintf("%d SFT steps per seed (model.seed = data.seed = the seed)", s.SFTSteps)
	if s.Seed1 != "" {
		w += fmt.Sprintf(", except the default warm start of seed 1: `%s`, the same SFT run made once and committed", s.Seed1)
	}
	return w
}

// checkout is the checked-out commit, marked when tracked files other
// than the runner's own output (the runs folder, the markdown and its
// plots: exclude) have changes.
func checkout(exclude ...string) string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return c
	}
	args := []string{"status", "--porcelain", "--untracked-files=no", "--", "."}
	for _, e := range exclude {
		// git refuses a path outside the repository (a runs folder in /tmp).
		if a, err := filepath.Abs(e); err == nil {
			if rel, err := filepath.Rel(strings.TrimSpace(string(root)), a); err == nil && filepath.IsLocal(rel) {
				args = append(args, ":(exclude)"+e)
			}
		}
	}
	st, err := exec.Command("git", args...).Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}
