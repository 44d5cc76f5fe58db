package env

import (
	"fmt"
	"slices"
)

// Context policies: who builds the prompt of each turn. In a whole
// trajectory (rollout.trajectory=whole) the prompt of turn k+1 is always
// the prompt of turn k, its response and the environment's answer: the
// context only grows. In step mode (rollout.trajectory=step) each turn is a
// sample of its own, (the context the environment built, the policy's
// response), as in Agent-R1's step-level MDP, and the episode decides what
// the next context holds: everything (full), the last K exchanges
// (window), or every exchange with the tool results of all but the last K
// replaced by ElidedMarker (drop_observations). An episode with a policy of
// its own (a summary, a scratchpad) implements Contexter.
//
// The policies work on tokens, never on re-encoded text: an exchange is the
// policy's response as sampled and the observation as the rollout encoded
// it once, so every context is a concatenation of token runs the rollout
// already holds, and chat-template boundaries stay where the template put
// them (a response ends at its stop token, an observation closes the
// assistant turn, carries the tool turn and opens the next assistant turn).

// ContextPolicy names a built-in context policy.
type ContextPolicy string

const (
	ContextFull             ContextPolicy = "full"              // append everything: the whole trajectory
	ContextWindow           ContextPolicy = "window"            // the first prompt and the last K exchanges
	ContextDropObservations ContextPolicy = "drop_observations" // tool results older than K exchanges elided
)

// ElidedMarker replaces a tool result that drop_observations leaves out:
// the model sees that something was there, not a silently shorter history.
const ElidedMarker = "[tool result elided]"

// Exchange is one finished turn of an episode in tokens: the policy's
// response as sampled, and the environment's answer to it.
type Exchange struct {
	Response    []int32 // the policy's tokens
	Observation []int32 // the observation, encoded once (mask 0)
	// Elided is the observation with each tool result replaced by
	// ElidedMarker and its markup kept (StepResult.Elided, encoded once).
	Elided []int32
}

// History is what a context policy sees: the episode's first prompt and
// every exchange so far, oldest first.
type History struct {
	Prompt []int32 // the first turn's prompt: chat template and generation prompt
	Turns  []Exchange
	// Encode is the rollout's tokenizer, for a policy that writes text of
	// its own (a summary); the built-in policies do not call it.
	Encode func(string) []int32
}

// Contexter is an Episode that builds the prompt of each turn after the
// first itself (step mode). Context returns the prompt of the next turn;
// the rollout continues the policy's cache when it extends the last
// turn's prompt and response token for token, and starts the turn afresh
// (a recorded rewrite) when it does not. ToolEnv and SearchR1Episode
// implement it with their config's built-in policy; an Episode that does
// not implement it gets ContextFull.
type Contexter interface {
	Context(h *History) []int32
}

// ContextConfig selects an episode's built-in context policy: the env
// section's context and context_turns keys.
type ContextConfig struct {
	Policy ContextPolicy `yaml:"context" help:"step mode (rollout.trajectory=step): the prompt of each turn: full (append everything), window (the first prompt and the last context_turns exchanges) or drop_observations (tool results older than context_turns exchanges elided)"`
	Turns  int           `yaml:"context_turns" help:"K of the window and drop_observations context policies (≥ 1)"`
}

// DefaultContextConfig is the full context: the whole trajectory.
func DefaultContextConfig() ContextConfig { return ContextConfig{Policy: ContextFull, Turns: 2} }

// Validate reports an unknown policy or a K below 1, naming the key.
func (c *ContextConfig) Validate() error {
	switch c.Policy {
	case ContextFull, ContextWindow, ContextDropObservations:
	default:
		return fmt.Errorf("context %q is not %s, %s or %s", c.Policy, ContextFull, ContextWindow, ContextDropObservations)
	}
	if c.Turns < 1 {
		return fmt.Errorf("context_turns %d must be ≥ 1", c.Turns)
	}
	return nil
}

// Build returns the next prompt under c's policy:
//
//	full:              P ‖ R_1 ‖ O_1 ‖ … ‖ R_n ‖ O_n
//	window:            P ‖ R_{n−K+1} ‖ O_{n−K+1} ‖ … ‖ R_n ‖ O_n
//	drop_observations: P ‖ R_1 ‖ E_1 ‖ … ‖ R_{n−K} ‖ E_{n−K} ‖ R_{n−K+1} ‖ O_{n−K+1} ‖ … ‖ R_n ‖ O_n
//
// with P the first prompt, R_k the k-th response, O_k its observation and
// E_k the observation with its tool results elided. Under full the result
// extends the last turn's prompt and response, so the rollout keeps its
// cache and the trainer merges the turns into one sequence; the other two
// rewrite the context once the history is longer than K exchanges.
func (c ContextConfig) Build(h *History) []int32 {
	n := len(h.Turns)
	first, elideBefore := 0, 0
	switch c.Policy {
	case ContextWindow:
		first = max(n-c.Turns, 0)
	case ContextDropObservations:
		elideBefore = max(n-c.Turns, 0)
	}
	size := len(h.Prompt)
	for k := first; k < n; k++ {
		size += len(h.Turns[k].Response) + len(h.Turns[k].Observation)
	}
	out := make([]int32, 0, size)
	out = append(out, h.Prompt...)
	for k := first; k < n; k++ {
		x := &h.Turns[k]
		out = append(out, x.Response...)
		if k < elideBefore && x.Elided != nil {
			out = append(out, x.Elided...)
		} else {
			out = append(out, x.Observation...)
		}
	}
	return out
}

// Extends reports whether next begins with prev token for token: the
// context of a turn that continues the last one rather than rewriting it.
func Extends(next, prev []int32) bool {
	return len(next) >= len(prev) && slices.Equal(next[:len(prev)], prev)
}

// Context builds the next prompt with the env's context policy
// (Contexter).
func (t *ToolEnv) Context(h *History) []int32 { return t.env.cfg.Context.Build(h) }

// Context builds the next prompt with the env's context policy
// (Contexter).
func (ep *SearchR1Episode) Context(h *History) []int32 { return ep.env.cfg.Context.Build(h) }
