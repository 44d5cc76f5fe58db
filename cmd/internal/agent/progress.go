package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// EvaluateProgress is Evaluate in chunks of chunk questions, printing a
// progress line to out after each (label: what is evaluated), so that an
// evaluation of thousands of questions is not minutes of silence. Greedy
// decoding makes each question's trajectory independent of its chunk.
// chunk ≤ 0 evaluates in one go and prints only the final line.
func EvaluateProgress(ctx context.Context, s *Setup, m *model.Model, samples []data.Sample, cfg EvalConfig,
	chunk int, out io.Writer, label string) (Results, []*rl.Trajectory, error) {
	if len(samples) == 0 {
		return nil, nil, fmt.Errorf("agent: %s: no samples to evaluate", label)
	}
	if chunk <= 0 || chunk > len(samples) {
		chunk = len(samples)
	}
	t0 := time.Now()
	fmt.Fprintf(out, "%s: evaluating %d questions\n", label, len(samples))
	total := Results{}
	var trajs []*rl.Trajectory
	for lo := 0; lo < len(samples); lo += chunk {
		hi := min(lo+chunk, len(samples))
		r, tr, err := Evaluate(ctx, s, m, samples[lo:hi], cfg)
		if err != nil {
			return nil, nil, err
		}
		total.add(r)
		trajs = append(trajs, tr...)
		all := total["all"]
		el := time.Since(t0)
		eta := time.Duration(float64(el) / float64(hi) * float64(len(samples)-hi))
		fmt.Fprintf(out, "%s: %d/%d questions, EM so far %.3f (%s, about %s left)\n", label, hi, len(samples),
			all.EM/float64(all.N), el.Round(time.Second), eta.Round(time.Second))
	}
	total.finish()
	return total, trajs, nil
}

// add accumulates r's means, weighted by their counts, into sums.
func (rs Results) add(r Results) {
	for k, x := range r {
		t := rs[k]
		if t == nil {
			t = &Result{}
			rs[k] = t
		}
		n := float64(x.N)
		t.N += x.N
		t.EM += x.EM * n
		t.F1 += x.F1 * n
		t.CoverEM += x.CoverEM * n
		t.Format += x.Format * n
		t.Score += x.Score * n
		t.Turns += x.Turns * n
		t.ToolCalls += x.ToolCalls * n
	}
}

// finish turns sums into means.
func (rs Results) finish() {
	for _, r := range rs {
		n := float64(r.N)
		r.EM, r.F1, r.CoverEM, r.Format, r.Score = r.EM/n, r.F1/n, r.CoverEM/n, r.Format/n, r.Score/n
		r.Turns, r.ToolCalls = r.Turns/n, r.ToolCalls/n
	}
}
