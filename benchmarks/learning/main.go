// Command learning trains every row of the learning table on the embedded
// synthetic world and writes the table, with learning-curve plots, to
// benchmarks/learning.md:
//
//	go run ./benchmarks/learning                 # the full table: 3 seeds, 30 steps per row
//	go run ./benchmarks/learning -all            # and the optional rows the default was chosen from
//	go run ./benchmarks/learning -smoke          # CI's size: 1 seed, 2 steps, a few questions, every row
//	go run ./benchmarks/learning -rows GRPO,RLOO # only rows whose name contains one of these
//
// It drives cmd/train and cmd/eval through their command lines (built once
// into the runs folder), so a row is the name and key=value overrides in
// rows.go. Each run leaves result.json in its folder under -out; a run whose
// result exists is not run again, so the table can be made in pieces and
// after an interruption (the same command resumes it). The full table's
// result files are committed under benchmarks/learning/runs, its default
// -out: the command on a fresh clone renders them and runs only what they
// lack, such as a new row. Every run of a folder is made at the CPU tier
// its table.json records (-cpu), since the tiers round differently; a warm
// start whose checkpoint is not there is trained again and must score what
// its results say. -render renders the markdown from what -out holds
// without training anything. The findings written by hand go in
// learning/notes.md beside the plots, which the markdown includes, so that
// rendering again keeps them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/r1go/r1go/internal/isa"
)

// fullOut is where the full table's runs go: their result files (warm.json,
// result.json, table.json) are committed, and the rest (checkpoints, logs,
// binaries) is ignored, so that the table is finished, or a row added, on
// any machine at the recorded CPU tier, running only what is missing (the
// warm starts a missing run needs are trained again and checked against
// their results).
var fullOut = filepath.Join("benchmarks", "learning", "runs")

func main() {
	size := FullSize
	smoke := flag.Bool("smoke", false, "CI's size: 1 seed, 2 steps per row, 20 questions, the committed warm start")
	out := flag.String("out", "", "folder of the runs, kept between invocations (default "+fullOut+", the committed table's results, or runs/learning-smoke)")
	cpu := flag.String("cpu", "", "CPU tier of every run (R1GO_CPU: avx512, avx2, generic); default the one -out's table.json records, else this machine's best")
	md := flag.String("md", filepath.Join("benchmarks", "learning.md"), "markdown file to write; its plots go beside it in a folder named after it")
	jobs := flag.Int("jobs", 1, "runs at once")
	threads := flag.Int("threads", 0, "threads of each run (0: the cores shared out among the -jobs runs)")
	rows := flag.String("rows", "", "comma-separated substrings: run only rows whose name contains one (or is one written =NAME), optional or not (the table still lists every row)")
	all := flag.Bool("all", false, "run the optional rows too (the smoke size always does)")
	render := flag.Bool("render", false, "render the markdown from -out without running anything")
	seeds := flag.Int("seeds", 0, "seeds per row (0: the size's)")
	only := flag.Int("seed", 0, "run only this seed of each row (0: every seed); the table still shows them all")
	steps := flag.Int("steps", 0, "RL steps per run (0: the size's)")
	flag.Parse()
	if *smoke {
		size = SmokeSize
	}
	if *seeds > 0 {
		size.Seeds = *seeds
	}
	if *steps > 0 {
		size.Steps = *steps
	}
	if *out == "" {
		*out = fullOut
		if *smoke {
			*out = filepath.Join("runs", "learning-smoke")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b := &Bench{Size: size, Out: *out, Jobs: *jobs, Threads: runThreads(*threads, *jobs, runtime.NumCPU()), Seed: *only, CPU: *cpu, Log: os.Stdout}
	// The markdown quotes the command that makes the whole table at this
	// size; -rows, -seed and -render only make it in pieces.
	var args []string
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "smoke", "all":
			if f.Value.String() == "true" {
				args = append(args, "-"+f.Name)
			}
		case "seeds", "steps": // -out says where, not what: not quoted
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	if err := b.Main(ctx, selectRows(Rows, *rows, *all || *smoke), !*render, *md, strings.Join(args, " ")); err != nil {
		fmt.Fprintln(os.Stderr, "learning:", err)
		os.Exit(1)
	}
}

// Main trains the rows (when train is set), reads every result under Out
// and writes the markdown and its plots to md. args is the command line the
// markdown quotes.
func (b *Bench) Main(ctx context.Context, run []Row, train bool, md, args string) error {
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return err
	}
	if train {
		cpu, err := pinCPU(b.Out, b.CPU, isa.Current())
		if err != nil {
			return err
		}
		b.CPU = cpu
	} else {
		b.CPU = recordedCPU(b.Out)
	}
	start := time.Now()
	var runErr error
	if train {
		runErr = b.Run(ctx, run)
		fmt.Fprintf(b.Log, "learning: runs done in %s\n", time.Since(start).Round(time.Second))
	}
	table, err := b.Collect(Rows)
	if err != nil {
		return err
	}
	cmd := "go run ./benchmarks/learning"
	if args != "" {
		cmd += " " + args
	}
	if err := Render(md, table, b.Size, RenderInfo{Command: cmd, Jobs: b.Jobs, Threads: b.Threads, CPU: b.CPU}); err != nil {
		return err
	}
	fmt.Fprintf(b.Log, "learning: wrote %s\n", md)
	return runErr
}

// runThreads is each run's thread count: the one asked for, or else, with
// several runs at once, the cores shared out among them (at least one
// each); 0 leaves a single run every core.
func runThreads(asked, jobs, cores int) int {
	if asked > 0 || jobs <= 1 {
		return asked
	}
	return max(cores/jobs, 1)
}

// selectRows keeps the rows whose name contains one of the comma-separated
// substrings, or equals one written with a leading "=" ("=GRPO": that row
// alone), optional or not; with no filter, every row that is not optional,
// or every row with all.
func selectRows(rows []Row, filter string, all bool) []Row {
	var out []Row
	for _, r := range rows {
		if filter == "" {
			if all || !r.Optional {
				out = append(out, r)
			}
			continue
		}
		for _, f := range strings.Split(filter, ",") {
			exact, ok := strings.CutPrefix(f, "=")
			if ok && r.Name == exact || !ok && f != "" && strings.Contains(r.Name, f) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}
