package rl

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/env"
)

// CheckToolFaults reads one step's tool-call counts (env.Env.ToolStats,
// taken once per step) and decides what the trainer says about them.
//
// warning is a console line when more than half of the calls that reached
// a tool failed, naming the commonest error kind and the URL it came from,
// e.g. "step 12: 7 of 8 tool calls failed (timeout 7 at
// http://127.0.0.1:8000/retrieve): is the retriever up?". Calls the model
// got wrong (tool/invalid) are the model's fault and not counted.
//
// err is non-nil when maxRate (trainer.max_tool_error_rate) is positive
// and the failure rate is above it: the run must stop, because rewards
// computed without the tool teach the policy to stop calling it. maxRate
// 0 (the default) never stops; it must lie in [0, 1].
func CheckToolFaults(step int, s env.ToolSnapshot, maxRate float64) (warning string, err error) {
	if math.IsNaN(maxRate) || maxRate < 0 || maxRate > 1 {
		return "", fmt.Errorf("rl: trainer.max_tool_error_rate %v: want a rate in [0, 1] (0: off)", maxRate)
	}
	ran := s.Executed()
	if ran == 0 || s.Errors == 0 {
		return "", nil
	}
	rate := s.ErrorRate()
	kind, url := s.WorstKind()
	where := ""
	if url != "" {
		where = " at " + url
	}
	line := fmt.Sprintf("step %d: %d of %d tool calls failed (%s %d%s)", step, s.Errors, ran, kind, s.ByKind[kind], where)
	if others := s.Errors - s.ByKind[kind]; others > 0 {
		line += fmt.Sprintf(", %d of other kinds", others)
	}
	if 2*s.Errors > ran {
		warning = "warning: " + line + ": is the retriever up? (see env.retriever_url, env.retriever_timeout)"
	}
	if maxRate > 0 && rate > maxRate {
		return warning, fmt.Errorf("rl: %s: error rate %.2f is above trainer.max_tool_error_rate %.2f", line, rate, maxRate)
	}
	return warning, nil
}
