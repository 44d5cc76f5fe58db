package rl

import (
	"fmt"
	"strings"
)

// Verifying a rollout dump: cmd/rollouts -verify FILE runs the verifier's
// record checks on every trajectory of a dump (verify.go), and its
// template checks on the dump's own text spans, so no tokenizer is needed.

// DumpStep is a turn sample of a step-mode trajectory in a dump.
type DumpStep struct {
	Prompt   []int32   `json:"prompt"`
	Response []int32   `json:"response"`
	LogProb  []float32 `json:"logprobs"`
	Rewrite  bool      `json:"rewrite,omitempty"`
}

func dumpSteps(st []TurnSample) []DumpStep {
	if st == nil {
		return nil
	}
	out := make([]DumpStep, len(st))
	for i, s := range st {
		out[i] = DumpStep{Prompt: s.Prompt, Response: s.Response, LogProb: s.LogProb, Rewrite: s.Rewrite}
	}
	return out
}

// Trajectory rebuilds the record of r as the verifier reads it; a dump
// written before records carried their tokens has none to check.
func (r *DumpRecord) Trajectory() (*Trajectory, error) {
	if r.Tokens == nil {
		return nil, fmt.Errorf("rl: dump record %d has no tokens (written before dumps carried them)", r.Index)
	}
	t := &Trajectory{Tokens: r.Tokens, Action: r.Action, LogProb: r.LogProbs, Group: r.Group, Turns: r.Turns, Finish: Finish(r.Finish)}
	t.Sample.ID = r.ID
	for _, s := range r.Spans {
		if s.Kind == SpanPrompt {
			t.PromptLen = s.TokenEnd
		}
	}
	for _, s := range r.Steps {
		t.Steps = append(t.Steps, TurnSample{Prompt: s.Prompt, Response: s.Response, LogProb: s.LogProb, Rewrite: s.Rewrite})
	}
	return t, nil
}

// VerifyRecord checks one dumped trajectory: the record checks, and the
// template checks (tmpl; the zero ChatTemplate skips them) on its spans.
func VerifyRecord(r *DumpRecord, tmpl ChatTemplate) *Violation {
	t, err := r.Trajectory()
	if err != nil {
		return &Violation{Traj: r.Index, ID: r.ID, Turn: -1, What: err.Error()}
	}
	v := &Verifier{}
	if w := v.Trajectory(r.Index, t); w != nil {
		return w
	}
	if tmpl.TurnEnd == "" {
		return nil
	}
	x := chatText{}
	for _, s := range r.Spans {
		text := r.Text[s.Start:s.End]
		switch s.Kind {
		case SpanPrompt:
			x.prompt, x.promptEnd = text, s.TokenEnd
		case SpanAction:
			x.turns, x.turnAt = append(x.turns, text), append(x.turnAt, s.TokenStart)
			x.obs, x.obsAt = append(x.obs, ""), append(x.obsAt, s.TokenEnd)
		case SpanObservation:
			if n := len(x.obs); n > 0 {
				x.obs[n-1] += text
			}
		}
	}
	bad := func(turn, tok int, format string, args ...any) *Violation {
		return &Violation{Traj: r.Index, ID: r.ID, Turn: turn, Token: tok, What: fmt.Sprintf(format, args...)}
	}
	return tmpl.check(x, bad)
}

// DumpTemplate guesses a dump's chat template: ChatML (QwenTemplate) when
// its prompt has ChatML turns and its observations are chat turns of their
// own, none for Search-R1's observations inside the assistant turn
// (<information>), which the template checks do not cover.
func DumpTemplate(r *DumpRecord) ChatTemplate {
	q := QwenTemplate()
	chat := false
	for _, s := range r.Spans {
		text := r.Text[s.Start:s.End]
		switch {
		case s.Kind == SpanPrompt:
			chat = strings.Contains(text, q.AssistantStart)
		case s.Kind == SpanObservation && strings.Contains(text, "<information>"):
			return ChatTemplate{}
		}
	}
	if chat {
		return q
	}
	return ChatTemplate{}
}
