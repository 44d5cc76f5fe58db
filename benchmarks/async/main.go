// Command async summarises bench.sh's runs, synchronous against
// asynchronous training with and without a slow tool, as the tables of
// benchmarks/async.md: per tool and mode, mean ± sample std over seeds of
// the RL throughput (tokens of the trained batches per second of RL wall
// time), the wall time to a validation EM of 0.3, and the held-out EM
// after the run's steps (the same number of trajectories in both modes);
// then each seed's asynchronous throughput over its synchronous twin's,
// in one process and on 2 MPI ranks (NP=2: dp2-sync, dp2-async).
//
// Usage: go run ./benchmarks/async [dir]   (default /tmp/async-bench)
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/r1go/r1go/rl/metrics"
)

// run is one bench.sh run's figures.
type run struct {
	tokensPerS float64 // Σ tokens / Σ step time
	wall       float64 // Σ step time + Σ validation time: the RL loop
	toTarget   float64 // RL wall time at the first validation with EM ≥ target; NaN if none
	heldOut    float64 // held-out EM after RL (eval.json "all")
	ageMean    float64 // mean token age (async/age_mean over steps)
	partial    float64 // mean share of partial trajectories
}

const target = 0.3

func main() {
	dir := "/tmp/async-bench"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := summarise(dir); err != nil {
		fmt.Fprintln(os.Stderr, "async:", err)
		os.Exit(1)
	}
}

func summarise(dir string) error {
	done, err := filepath.Glob(filepath.Join(dir, "*-s*", "done"))
	if err != nil {
		return err
	}
	runs := map[string]map[string]run{} // "tool mode" → seed → run
	for _, d := range done {
		name := filepath.Base(filepath.Dir(d))
		cut := strings.LastIndex(name, "-s")
		key, seed := strings.Replace(name[:cut], "-", " ", 1), name[cut+2:]
		r, err := readRun(filepath.Dir(d))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if runs[key] == nil {
			runs[key] = map[string]run{}
		}
		runs[key][seed] = r
	}
	if len(runs) == 0 {
		return fmt.Errorf("no finished run in %s", dir)
	}
	fmt.Printf("| tool | mode | runs | RL tokens/s | RL wall (s) | wall to val EM %.1f (s) | held-out EM | token age | partial |\n", target)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, tool := range []string{"slow", "fast"} {
		for _, mode := range []string{"sync", "async", "dp2-sync", "dp2-async"} {
			rs := runs[tool+" "+mode]
			if len(rs) == 0 {
				continue
			}
			col := func(f func(run) float64) string { return meanStd(rs, f) }
			fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", tool, mode, len(rs),
				col(func(r run) float64 { return r.tokensPerS }), col(func(r run) float64 { return r.wall }),
				reached(rs), col(func(r run) float64 { return r.heldOut }),
				col(func(r run) float64 { return r.ageMean }), col(func(r run) float64 { return r.partial }))
		}
	}
	fmt.Println()
	fmt.Println("| tool | launch | seed | async / sync tokens/s | held-out EM async − sync |")
	fmt.Println("|---|---|---|---|---|")
	for _, tool := range []string{"slow", "fast"} {
		for _, launch := range []string{"", "dp2-"} {
			for _, seed := range slices.Sorted(maps.Keys(runs[tool+" "+launch+"sync"])) {
				s := runs[tool+" "+launch+"sync"][seed]
				a, ok := runs[tool+" "+launch+"async"][seed]
				if !ok {
					continue
				}
				fmt.Printf("| %s | %s | %s | %.2f | %+.3f |\n", tool, cmp.Or(strings.TrimSuffix(launch, "-"), "one process"), seed,
					a.tokensPerS/s.tokensPerS, a.heldOut-s.heldOut)
			}
		}
	}
	return nil
}

// readRun reads a run folder's metrics and held-out results.
func readRun(dir string) (run, error) {
	recs, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		return run{}, err
	}
	r := run{toTarget: math.NaN()}
	var tokens, steps float64
	for _, rec := range recs {
		d := rec.Data
		tokens += d["perf/total_num_tokens"]
		steps += d["timing_s/step"]
		r.wall += d["timing_s/step"] + d["timing_s/testing"]
		if em, ok := d["val-core/all/em"]; ok && em >= target && math.IsNaN(r.toTarget) {
			r.toTarget = r.wall
		}
		r.ageMean += d["async/age_mean"] / float64(len(recs))
		r.partial += d["async/partial"] / float64(len(recs))
	}
	if steps == 0 {
		return run{}, fmt.Errorf("no step timings in metrics.jsonl")
	}
	r.tokensPerS = tokens / steps
	b, err := os.ReadFile(filepath.Join(dir, "eval.json"))
	if err != nil {
		return run{}, err
	}
	var res map[string]struct{ EM float64 }
	if err := json.Unmarshal(b, &res); err != nil {
		return run{}, fmt.Errorf("eval.json: %w", err)
	}
	r.heldOut = res["all"].EM
	return r, nil
}

// meanStd is "mean ± sample std" of f over the runs (the mean alone for one).
func meanStd(rs map[string]run, f func(run) float64) string {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return format(xs)
}

func format(xs []float64) string {
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	digits := 3 // EM, ages, shares
	if math.Abs(m) >= 10 {
		digits = 0 // tokens/s, seconds
	}
	if len(xs) < 2 {
		return fmt.Sprintf("%.*f", digits, m)
	}
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return fmt.Sprintf("%.*f ± %.*f", digits, m, digits, math.Sqrt(v/float64(len(xs)-1)))
}

// reached is the wall time to the target over the runs that reached it,
// and how many did.
func reached(rs map[string]run) string {
	var xs []float64
	for _, r := range rs {
		if !math.IsNaN(r.toTarget) {
			xs = append(xs, r.toTarget)
		}
	}
	if len(xs) == 0 {
		return fmt.Sprintf("not reached (0 of %d)", len(rs))
	}
	return fmt.Sprintf("%s (%d of %d)", format(xs), len(xs), len(rs))
}
