// Command rollouts pretty-prints the trajectories that train writes to
// trainer.rollout_data_dir (RUN/rollouts/step_N.jsonl and val_step_N.jsonl):
//
//	go run ./cmd/rollouts RUN/rollouts/step_12.jsonl            # the first trajectory
//	go run ./cmd/rollouts -i 5 -prompt RUN/rollouts/step_12.jsonl
//	go run ./cmd/rollouts -list RUN/rollouts/step_12.jsonl      # one line per trajectory
//	go run ./cmd/rollouts -verify RUN/rollouts/step_12.jsonl    # the trajectory verifier
//	go run ./cmd/rollouts -chains EVAL/agent.jsonl              # synthetic questions: where each run left its chain
//
// The response is printed span by span: what the policy sampled (action
// mask 1, the tokens the loss trains on) between ▶ action and ◀ markers,
// what the environment inserted (mask 0) under observation headers; an
// action header also gives that turn's sampler-vs-trainer mismatch when the
// dump has it, and -list the turn where it is largest. -color
// shows actions in green and observations dimmed instead. -verify runs
// the trajectory verifier (rl/verify.go) on every trajectory of the file
// and names each violation's trajectory, turn and token; it exits 1 when
// there is one. -chains counts the trajectories on synthetic-world
// questions (train's dumps, cmd/eval -trajectories) by where each left
// its question's chain: right, a wrong relation or a miscopied name at
// search N, stopped early, searched past the chain, a wrong answer.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/r1go/r1go/rl"
)

func main() {
	fs := flag.NewFlagSet("rollouts", flag.ContinueOnError)
	index := fs.Int("i", 0, "which trajectory of the file (its index field)")
	list := fs.Bool("list", false, "list the file's trajectories, one line each")
	prompt := fs.Bool("prompt", false, "print the prompt too")
	color := fs.Bool("color", false, "mark spans with ANSI colours instead of text markers")
	verify := fs.Bool("verify", false, "check every trajectory with the trajectory verifier; exit 1 on a violation")
	chainsFlag := fs.Bool("chains", false, "synthetic-world questions: count the trajectories by where each left its question's chain")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rollouts [-i N] [-list] [-prompt] [-color] [-verify] [-chains] FILE.jsonl")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if *chainsFlag {
		if err := chains(os.Stdout, fs.Arg(0)); err != nil {
			fmt.Fprintln(os.Stderr, "rollouts:", err)
			os.Exit(1)
		}
		return
	}
	if *verify {
		if err := verifyFile(os.Stdout, fs.Arg(0)); err != nil {
			fmt.Fprintln(os.Stderr, "rollouts:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Stdout, fs.Arg(0), *index, *list, *prompt, *color); err != nil {
		fmt.Fprintln(os.Stderr, "rollouts:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, path string, index int, list, prompt, color bool) error {
	recs, err := rl.ReadDump(path)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("%s holds no trajectories", path)
	}
	if list {
		for _, r := range recs {
			fmt.Fprintf(out, "%4d  group %-3d reward %6.3f  %s  turns %d, calls %d  %s%s\n",
				r.Index, r.Group, r.Reward, advText(r), r.Turns, r.NumToolCalls, oneLine(r.Question, 60), worstTurnText(r))
		}
		return nil
	}
	for _, r := range recs {
		if r.Index == index {
			render(out, r, prompt, color)
			return nil
		}
	}
	return fmt.Errorf("%s has no trajectory %d (indices %d to %d)", path, index, recs[0].Index, recs[len(recs)-1].Index)
}

// metricsText lists the task's metrics in name order: ", em 1, f1 0.667".
func metricsText(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, ", %s %.3g", k, m[k])
	}
	return b.String()
}

func advText(r rl.DumpRecord) string {
	if r.Advantage == nil {
		return "advantage   -   "
	}
	return fmt.Sprintf("advantage %+7.3f", *r.Advantage)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

const (
	green = "\x1b[32m"
	dim   = "\x1b[2m"
	reset = "\x1b[0m"
)

// render prints one trajectory: a header with its scores, then its spans.
func render(out io.Writer, r rl.DumpRecord, prompt, color bool) {
	src := r.DataSource
	if r.ID != "" {
		src += " " + r.ID
	}
	fmt.Fprintf(out, "step %d, trajectory %d (group %d) %s\n", r.Step, r.Index, r.Group, strings.TrimSpace(src))
	fmt.Fprintf(out, "question:     %s\n", r.Question)
	fmt.Fprintf(out, "ground truth: %s\n", strings.Join(r.Answers, " | "))
	fmt.Fprintf(out, "reward %.3f%s, %s, finish %s, %d turns, %d tool calls\n",
		r.Reward, metricsText(r.Metrics), advText(r), r.Finish, r.Turns, r.NumToolCalls)
	fmt.Fprintf(out, "tokens: %d prompt, %d action (mask 1, trained on), %d observation (mask 0)\n\n", r.PromptTokens, r.ActionTokens, r.ObsTokens)
	turn := 0 // action spans are the model's turns (mismatch.go)
	for _, s := range r.Spans {
		text := r.Text[s.Start:s.End]
		switch s.Kind {
		case rl.SpanPrompt:
			if !prompt {
				fmt.Fprintf(out, "[prompt: tokens %d-%d, not shown; -prompt shows it]\n", s.TokenStart, s.TokenEnd)
				continue
			}
			fmt.Fprintf(out, "[prompt: tokens %d-%d]\n%s\n", s.TokenStart, s.TokenEnd, text)
		case rl.SpanAction:
			turn++
			if color {
				fmt.Fprintf(out, "%s%s%s", green, text, reset)
				continue
			}
			fmt.Fprintf(out, "▶ action: tokens %d-%d, mask 1%s\n%s\n◀\n", s.TokenStart, s.TokenEnd, turnMismatchText(r, turn-1), text)
		default:
			if color {
				fmt.Fprintf(out, "%s%s%s", dim, text, reset)
				continue
			}
			fmt.Fprintf(out, "· observation: tokens %d-%d, mask 0\n%s\n", s.TokenStart, s.TokenEnd, text)
		}
	}
	if color {
		fmt.Fprintln(out)
	}
}

// verifyFile runs the verifier on every trajectory of a dump, prints each
// violation and a summary, and fails when there was one.
func verifyFile(out io.Writer, path string) error {
	recs, err := rl.ReadDump(path)
	if err != nil {
		return err
	}
	bad := 0
	for i := range recs {
		if w := rl.VerifyRecord(&recs[i], rl.DumpTemplate(&recs[i])); w != nil {
			fmt.Fprintln(out, w)
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d of %d trajectories fail the verifier", path, bad, len(recs))
	}
	fmt.Fprintf(out, "%s: %d trajectories verified\n", path, len(recs))
	return nil
}
