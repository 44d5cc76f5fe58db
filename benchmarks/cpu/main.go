// Command cpu runs the CPU benchmark suite. Every figure is reported as a
// ratio to a denominator measured in the same run: the FMA peak and memory
// bandwidth probes of package probe, or a peer library (OpenBLAS) called on
// the same inputs.
//
// The suite is a list of sections; each prints its rows as it measures them
// and returns them, and a table of every row is printed last. Usage:
//
//	go run ./benchmarks/cpu [-threads 2] [-sections matmul] [-reps 3]
//	go run ./benchmarks/cpu -sections step   # one GRPO step of a 0.5B-shaped model
//	go run ./benchmarks/cpu -sections step -tiers avx512,avx2   # the same at two CPU tiers
//
// A missing peer is reported as a row ("OpenBLAS not found"), never as a
// failure.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
)

// section is one part of the suite.
type section struct {
	name  string
	run   func(env *env) []row
	named bool // runs only when -sections names it (a long one)
}

var sections = []section{
	{"matmul", matmulSection, false},
	{"train", trainSection, false},
	{"decode", decodeSection, false},
	{"step", stepSection, true},
}

// row is one measured figure with its same-run ratios.
type row struct {
	section string
	name    string  // what was measured
	value   float64 // in unit
	unit    string
	ratios  []ratio
	note    string
}

// ratio is value ÷ a same-run denominator, named by what it divides by.
type ratio struct {
	of    string
	value float64
}

func (r row) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-44s %9.1f %-8s", r.section, r.name, r.value, r.unit)
	for _, q := range r.ratios {
		fmt.Fprintf(&b, "  %.2f×%s", q.value, q.of)
	}
	if r.note != "" {
		fmt.Fprintf(&b, "  (%s)", r.note)
	}
	return b.String()
}

// env carries the run's settings and its same-run denominators, shared by
// all sections.
type env struct {
	threads int
	reps    int
	peak    map[string]probe.Peak // best FMA peak seen so far on env.threads, by ISA
	readBW  probe.Bandwidth       // zero until measured
	match   *regexp.Regexp        // sections run only the cases whose names match
	step    stepOptions
}

// readBandwidth measures (once) the read bandwidth of env.threads threads
// over a 256 MB buffer, eight times this machine's L3.
func (e *env) readBandwidth() probe.Bandwidth {
	if e.readBW.Wall == 0 {
		e.readBW = probe.ReadBandwidthDetail(256<<20, e.threads)
		fmt.Printf("probe    read bandwidth on %d threads: %.1f GB/s, %.1f GB/core-s\n", e.threads, e.readBW.Wall, e.readBW.PerCore)
	}
	return e.readBW
}

// reprobeBandwidth measures the read bandwidth again and keeps the best
// seen in the run (a ratio to a bound is then never flattered by a probe
// that ran in a slow moment), saying so when the figure moves.
func (e *env) reprobeBandwidth() probe.Bandwidth {
	old := e.readBandwidth()
	if b := probe.ReadBandwidthDetail(256<<20, e.threads); b.Wall > old.Wall {
		e.readBW = b
		fmt.Printf("probe    read bandwidth on %d threads, again: %.1f GB/s, %.1f GB/core-s\n", e.threads, b.Wall, b.PerCore)
	}
	return e.readBW
}

// fmaPeak returns the best wall-clock FMA peak (GFLOP/s on env.threads)
// seen in the run for isa, "best" meaning the widest loop this CPU has
// (probe.DotBF16ISA: the bf16 dot product's peak instead, 0 where the CPU
// has none); it probes first if nothing was measured yet.
func (e *env) fmaPeak(isa string) float64 {
	if isa == "best" {
		isa = probe.BestISA()
	}
	if _, ok := e.peak[isa]; !ok {
		for i := 0; i < 3; i++ {
			e.probePeaks(isa)
		}
	}
	return e.peak[isa].Wall
}

// probePeaks measures the FMA peak of isa, or the bf16 dot product's for
// probe.DotBF16ISA, or the AMX tile product's for probe.AMXISA (a short
// probe, meant to be interleaved with the timed work), and keeps the best
// seen in the run.
func (e *env) probePeaks(isa string) {
	w, r := probe.Window, probe.Repeats
	probe.Window, probe.Repeats = 100*time.Millisecond, 1
	defer func() { probe.Window, probe.Repeats = w, r }()
	label := fmt.Sprintf("FMA peak %-6s", isa)
	measure := func() (probe.Peak, error) { return probe.FMAPeakDetail(isa, e.threads) }
	switch isa {
	case probe.DotBF16ISA:
		label = "bf16 dot peak"
		measure = func() (probe.Peak, error) { return probe.DotBF16Peak(e.threads) }
	case probe.AMXISA:
		label = "AMX product peak (in cache)"
		measure = func() (probe.Peak, error) { return probe.AMXPeak(e.threads) }
	}
	p, err := measure()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	old, seen := e.peak[isa]
	if !seen {
		fmt.Printf("probe    %s on %d threads: %.1f GFLOP/s, %.1f GFLOP/core-s\n", label, e.threads, p.Wall, p.PerCore)
	}
	old.ISA, old.Threads = p.ISA, p.Threads
	old.Wall = max(old.Wall, p.Wall)
	old.PerCore = max(old.PerCore, p.PerCore)
	e.peak[isa] = old
}

func main() {
	threads := flag.Int("threads", 2, "threads for our code, the probes and the peers")
	only := flag.String("sections", "", "comma-separated sections to run (default all: "+sectionNames()+")")
	match := flag.String("match", "", "regular expression: run only the cases (matmul shapes, ...) whose names match")
	reps := flag.Int("reps", 5, "timed repetitions per figure, interleaved with the peers and probes; the best is kept")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)")
	var so stepOptions
	flag.StringVar(&so.dir, "step_dir", "/tmp/r1go-qwen2.5-0.5b-random", "step: the Qwen2.5-0.5B-shaped bf16 folder (made by memstep -gen when missing)")
	flag.IntVar(&so.prompts, "step_prompts", 8, "step: prompts")
	flag.IntVar(&so.n, "step_n", 4, "step: samples per prompt")
	flag.IntVar(&so.promptLen, "step_prompt_len", 64, "step: prompt tokens")
	flag.IntVar(&so.respLen, "step_response_len", 256, "step: response tokens (decode steps)")
	flag.IntVar(&so.microSeqs, "step_micro_seqs", 2, "step: sequences per micro-batch of the update, for r1go and PyTorch")
	flag.IntVar(&so.trainerMicro, "step_trainer_micro", 0, "step: also time the update at this micro_batch_tokens, e.g. the trainer's 8192 (0: skip)")
	flag.BoolVar(&so.score, "step_score", true, "step: time the old and reference log-probs (false: skip them)")
	flag.BoolVar(&so.update, "step_update", true, "step: time the update (false: the rollout and scoring only)")
	flag.BoolVar(&so.peer, "step_peer", true, "step: run the PyTorch peer (false: r1go's phases only)")
	flag.StringVar(&so.state, "step_state", "bfloat16", "step: AdamW moment dtype (float32 or bfloat16)")
	flag.Float64Var(&so.memLimitGiB, "step_memlimit", 7, "step: the Go collector's soft memory limit in GiB for r1go's step (0: none; GOMEMLIMIT, when set, wins)")
	flag.BoolVar(&so.spillRef, "step_spill_ref", true, "step: keep the reference's weights in a file mapping in $TMPDIR, resident only while it scores")
	flag.Float64Var(&so.saveGiB, "step_save_gib", 1.5, "step: the policy's saved-activation bound in GiB (model.Model.SaveBytes; 0: the automatic 1 GiB): 1.5 keeps every layer and the logits of a 640-token micro-batch")
	flag.BoolVar(&so.offloadOptim, "step_offload_optim", true, "step: keep AdamW's moments in file mappings in $TMPDIR, resident during its step only (trainer.optim_offload)")
	rolloutDTypes := flag.String("step_rollout", "float32,bfloat16", "step: rollouts to time, comma-separated: float32 (from the policy), bfloat16 (from its bf16 copy, rollout.dtype bfloat16); the last one's sequences are trained on")
	tiers := flag.String("tiers", "", "run the sections at each of these CPU tiers (R1GO_CPU), comma-separated, e.g. avx512,avx2, each in a child process, taking turns, and print the figures side by side")
	tierTurns := flag.Int("tier_turns", 1, "tiers: times through the list of tiers (the best turn of each is kept)")
	rowsJSON := flag.String("rows_json", "", "also write the rows as JSON to this file (the tiers mode's children)")
	streams := flag.String("step_streams", "", `step: on the AMX path, decode the bf16 rollout again with each of these R1GO_AMX_STREAM values, comma-separated ("" the default, nopf, avx: ",avx" compares the default with avx), taking turns three times`)
	flag.BoolVar(&so.kvPages, "step_kvpages", false, "step: decode the bf16 rollout again with its KV cache in huge pages and in 4 KiB pages (cpu.KVCacheHugePages), taking turns three times")
	flag.Parse()
	so.rolloutDTypes = strings.Split(*rolloutDTypes, ",")
	if *streams != "" {
		so.streams = strings.Split(*streams, ",")
	}
	if *threads < 1 || *reps < 1 {
		fmt.Fprintln(os.Stderr, "cpu: -threads and -reps must be ≥ 1")
		os.Exit(2)
	}
	var want []string
	if *only != "" {
		want = strings.Split(*only, ",")
		for _, w := range want {
			if !slices.ContainsFunc(sections, func(s section) bool { return s.name == w }) {
				fmt.Fprintf(os.Stderr, "cpu: unknown section %q (have %s)\n", w, sectionNames())
				os.Exit(2)
			}
		}
	}
	if *tiers != "" {
		var args []string
		flag.Visit(func(f *flag.Flag) {
			if f.Name != "tiers" && f.Name != "tier_turns" && f.Name != "rows_json" {
				args = append(args, "-"+f.Name+"="+f.Value.String())
			}
		})
		if err := runTiers(strings.Split(*tiers, ","), max(1, *tierTurns), args); err != nil {
			fmt.Fprintln(os.Stderr, "cpu:", err)
			os.Exit(1)
		}
		return
	}
	runtime.GOMAXPROCS(*threads)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpu: -cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	printMachine(*threads)

	re, err := regexp.Compile(*match)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpu: -match: %v\n", err)
		os.Exit(2)
	}
	e := &env{threads: *threads, reps: *reps, peak: map[string]probe.Peak{}, match: re, step: so}
	var rows []row
	for _, s := range sections {
		if want != nil && !slices.Contains(want, s.name) || want == nil && s.named {
			continue
		}
		fmt.Printf("== %s\n", s.name)
		t0 := time.Now()
		rows = append(rows, s.run(e)...)
		fmt.Printf("== %s done in %.1f s\n", s.name, time.Since(t0).Seconds())
	}
	printTable(rows)
	if *rowsJSON != "" {
		if err := writeRows(*rowsJSON, rows); err != nil {
			fmt.Fprintln(os.Stderr, "cpu: -rows_json:", err)
			os.Exit(1)
		}
	}
}

func sectionNames() string {
	var n []string
	for _, s := range sections {
		n = append(n, s.name)
	}
	return strings.Join(n, ",")
}

func printTable(rows []row) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(w, "section\tfigure\tvalue\tunit\tratios\tnote\t")
	for _, r := range rows {
		var qs []string
		for _, q := range r.ratios {
			qs = append(qs, fmt.Sprintf("%.2f × %s", q.value, q.of))
		}
		val := "-"
		if r.unit != "" {
			val = fmt.Sprintf("%.1f", r.value)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.section, r.name, val, r.unit, strings.Join(qs, ", "), r.note)
	}
	w.Flush()
}
