package rl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/r1go/r1go/model/tokenizer"
)

// The rollout dump makes what the policy generated readable, as verl's
// trainer.rollout_data_dir and log_val_generations do: one JSON object per
// trajectory per line, with the rendered text and the token spans that say
// which parts the policy sampled (the action mask), which the environment
// inserted, and where the prompt ends.

// Span is a run of tokens of one kind in a dumped trajectory. Start and End
// are byte offsets into DumpRecord.Text, TokenStart and TokenEnd token
// indices into the trajectory.
type Span struct {
	Kind       string `json:"kind"` // SpanPrompt, SpanAction or SpanObservation
	Start      int    `json:"start"`
	End        int    `json:"end"`
	TokenStart int    `json:"token_start"`
	TokenEnd   int    `json:"token_end"`
}

// Span kinds.
const (
	SpanPrompt      = "prompt"      // the chat prompt: not trained on
	SpanAction      = "action"      // sampled by the policy: action mask 1, trained on
	SpanObservation = "observation" // inserted by the environment (tool results, template tokens): mask 0
)

// DumpRecord is one trajectory as written to a rollout JSONL file.
type DumpRecord struct {
	Step       int      `json:"step"`
	Index      int      `json:"index"` // position in the step's batch
	Group      int      `json:"group"` // the prompt's index; samples of one prompt share it
	ID         string   `json:"id,omitempty"`
	DataSource string   `json:"data_source,omitempty"`
	Question   string   `json:"question"`
	Answers    []string `json:"ground_truth"`
	Text       string   `json:"text"` // the whole rendered trajectory: prompt, then response
	Spans      []Span   `json:"spans"`
	ToolCalls  []string `json:"tool_calls"`   // the policy's <tool_call> bodies, in order
	Obs        []string `json:"observations"` // the environment's insertions after the prompt, in order
	Reward     float64  `json:"reward"`       // the outcome reward
	// Metrics are the task's named scores of the trajectory (the QA task:
	// em, f1, cover_em, format), as the trainer logs them under env/.
	Metrics map[string]float64 `json:"metrics"`
	// Advantage is the advantage of the first action token and
	// AdvantageMean the mean over action tokens (equal under GRPO, RLOO and
	// REINFORCE++'s outcome advantages; different under GAE). Absent for
	// validation trajectories, which are not trained on.
	Advantage     *float64 `json:"advantage,omitempty"`
	AdvantageMean *float64 `json:"advantage_mean,omitempty"`
	Turns         int      `json:"turns"`
	NumToolCalls  int      `json:"num_tool_calls"`
	Finish        string   `json:"finish"`
	PromptTokens  int      `json:"prompt_tokens"`
	ActionTokens  int      `json:"action_tokens"`
	ObsTokens     int      `json:"observation_tokens"`
	// Mismatch is the sampler's log-probs against the trainer's, per model
	// turn (rollcorr_metrics.go); absent where the step did not measure it.
	Mismatch []TurnMismatch `json:"mismatch,omitempty"`
	// Tokens, Action and LogProbs are the transcript token by token, and
	// Steps its turn samples in step mode: what cmd/rollouts -verify checks
	// (dumpverify.go).
	Tokens   []int32    `json:"tokens,omitempty"`
	Action   []bool     `json:"action,omitempty"`
	LogProbs []float32  `json:"logprobs,omitempty"`
	Steps    []DumpStep `json:"turn_samples,omitempty"`
}

// DumpRecords renders trajectories for the dump. advantages, when not nil,
// holds each trajectory's per-token advantages (Batch.Advantages split by
// Batch.Offsets, in trajectory order).
func DumpRecords(step int, trajs []*Trajectory, advantages [][]float64, tok *tokenizer.Tokenizer) []DumpRecord {
	out := make([]DumpRecord, len(trajs))
	for i, t := range trajs {
		r := DumpRecord{Step: step, Index: i, Group: t.Group, ID: t.Sample.ID, DataSource: t.Sample.DataSource,
			Question: t.Sample.Question, Answers: t.Sample.Answers, Reward: t.Outcome.Reward,
			Metrics: t.Outcome.Metrics, Turns: t.Turns, NumToolCalls: t.ToolCalls, Finish: string(t.Finish),
			ToolCalls: []string{}, Obs: []string{}, Mismatch: t.Mismatch,
			Tokens: t.Tokens, Action: t.Action, LogProbs: t.LogProb, Steps: dumpSteps(t.Steps)}
		var text strings.Builder
		emit := func(kind string, a, b int) {
			ids := make([]int, b-a)
			for k := range ids {
				ids[k] = int(t.Tokens[a+k])
			}
			s := tok.DecodeText(ids)
			r.Spans = append(r.Spans, Span{Kind: kind, Start: text.Len(), End: text.Len() + len(s), TokenStart: a, TokenEnd: b})
			text.WriteString(s)
			switch kind {
			case SpanPrompt:
				r.PromptTokens += b - a
			case SpanAction:
				r.ActionTokens += b - a
				r.ToolCalls = append(r.ToolCalls, toolCallBodies(s)...)
			case SpanObservation:
				r.ObsTokens += b - a
				r.Obs = append(r.Obs, s)
			}
		}
		if t.PromptLen > 0 {
			emit(SpanPrompt, 0, t.PromptLen)
		}
		for a := t.PromptLen; a < len(t.Tokens); {
			act := t.Action[a]
			b := a + 1
			for b < len(t.Tokens) && t.Action[b] == act {
				b++
			}
			kind := SpanObservation
			if act {
				kind = SpanAction
			}
			emit(kind, a, b)
			a = b
		}
		r.Text = text.String()
		if advantages != nil && i < len(advantages) {
			adv := advantages[i]
			var sum float64
			n := 0
			for k, a := range t.Action {
				if a && k < len(adv) {
					if n == 0 {
						first := adv[k]
						r.Advantage = &first
					}
					sum += adv[k]
					n++
				}
			}
			if n > 0 {
				mean := sum / float64(n)
				r.AdvantageMean = &mean
			}
		}
		out[i] = r
	}
	return out
}

// toolCallBodies returns the text between each <tool_call> and
// </tool_call> of s (an unclosed last call runs to the end).
func toolCallBodies(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "<tool_call>")
		if i < 0 {
			return out
		}
		s = s[i+len("<tool_call>"):]
		j := strings.Index(s, "</tool_call>")
		if j < 0 {
			return append(out, strings.TrimSpace(s))
		}
		out = append(out, strings.TrimSpace(s[:j]))
		s = s[j+len("</tool_call>"):]
	}
}

// SplitAdvantages splits b's per-token advantages by sequence. A step-mode
// batch (Batch.Traj) packs turns, not transcripts, so it has none to split.
func SplitAdvantages(b *Batch) [][]float64 {
	if b == nil || len(b.Advantages) == 0 || b.Traj != nil {
		return nil
	}
	out := make([][]float64, len(b.Offsets)-1)
	for i := range out {
		out[i] = b.Advantages[b.Offsets[i]:b.Offsets[i+1]]
	}
	return out
}

// WriteDump writes records as JSONL to path (its folder created 0755),
// replacing the file whole.
func WriteDump(path string, recs []DumpRecord) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("rl: rollout dump: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("rl: rollout dump: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("rl: rollout dump %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("rl: rollout dump %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("rl: rollout dump %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// ReadDump reads a rollout JSONL file, naming the line of a malformed
// record and checking that its spans tile its text.
func ReadDump(path string) ([]DumpRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rl: %w", err)
	}
	defer f.Close()
	var out []DumpRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<28)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r DumpRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("rl: %s:%d: %w", path, line, err)
		}
		if err := r.checkSpans(); err != nil {
			return nil, fmt.Errorf("rl: %s:%d: %w", path, line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rl: %s: %w", path, err)
	}
	return out, nil
}

// checkSpans checks that the spans cover the text in order, without gaps.
func (r *DumpRecord) checkSpans() error {
	at := 0
	for i, s := range r.Spans {
		if s.Start != at || s.End < s.Start || s.End > len(r.Text) {
			return fmt.Errorf("span %d [%d,%d) does not continue at byte %d of a %d-byte text", i, s.Start, s.End, at, len(r.Text))
		}
		switch s.Kind {
		case SpanPrompt, SpanAction, SpanObservation:
		default:
			return fmt.Errorf("span %d has kind %q, want prompt, action or observation", i, s.Kind)
		}
		at = s.End
	}
	if at != len(r.Text) {
		return fmt.Errorf("spans end at byte %d of a %d-byte text", at, len(r.Text))
	}
	return nil
}
