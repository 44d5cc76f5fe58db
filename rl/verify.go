package rl

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The trajectory verifier. Multi-turn training goes wrong quietly when the
// trained tokens are not the sampled ones (a re-tokenised turn), when an
// environment token is trained on (a mask one token off), when a turn's
// prompt is not the context the policy saw, or when the environment's text
// breaks the chat template. The verifier checks each of these on every
// step's trajectories and on the batch packed from them, before anything
// is trained, and names the trajectory, the turn and the token of the
// first violation. rollout.verify says what a violation does: fail the
// step (the default), drop the trajectory and count it, or nothing (off).
//
// The checks, on a trajectory's record (Trajectory; cmd/rollouts -verify
// reads the same from a dump):
//
//   - log-probabilities: every action token's is finite and ≤ 0 (up to
//     rounding), every other token's 0 (the sampler records one per drawn
//     token only);
//   - turns (step mode): turn 0's prompt is the transcript's prompt; each
//     turn's response is the transcript's next run of action tokens, with
//     its log-probabilities; each later prompt extends the previous prompt
//     and response token for token, or is a recorded rewrite;
//   - template (ChatML, when the verifier knows the markup): the prompt and
//     every observation that a turn follows leave an assistant turn open; an
//     observation closes the assistant turn it follows unless the turn
//     closed itself, and wraps its tool results in the tool-response tags;
//   - stops (when the verifier knows the stop tokens): a stop token is only
//     ever the last token of a turn (the rollout stops there).
//
// Only what the rollout, the environment and the packer put there is
// checked: the text a policy samples is its own, so a turn that writes
// "<|im_start|>" or a broken tool call is trained on, not refused.
//
// And on the packed batch against the records (Verifier.Batch): walking a
// trajectory's sequences in order, the tokens with action mask 1 are the
// record's action tokens in order, each with its sampling log-probability,
// and there are no others: an environment token with mask 1 or a sampled
// token with mask 0 is a mismatch at that position.

// The rollout.verify settings.
const (
	VerifyFail = "fail" // a violation fails the step
	VerifyDrop = "drop" // a violating trajectory is dropped and counted
	VerifyOff  = "off"
)

// logProbSlack is how far above 0 a sampled token's log-probability may
// round (x − logsumexp computed in float32 or bf16 on a device).
const logProbSlack = 1e-3

// Violation is the first thing a verifier found wrong with a trajectory.
type Violation struct {
	Traj  int    // index in the step's batch
	ID    string // the sample's id
	Turn  int    // model turn, from 0; −1 when the prompt
	Token int    // index in the transcript (Trajectory.Tokens), or in the turn's prompt for a prompt check
	What  string
}

func (v *Violation) Error() string {
	turn := "the prompt"
	if v.Turn >= 0 {
		turn = fmt.Sprintf("turn %d", v.Turn)
	}
	return fmt.Sprintf("rl: verify: trajectory %d (%s), %s, token %d: %s", v.Traj, v.ID, turn, v.Token, v.What)
}

// ChatTemplate is the markup the template checks look for; the zero value
// turns them off (a format without chat turns around observations, such
// as Search-R1's).
type ChatTemplate struct {
	TurnStart, TurnEnd         string // "<|im_start|>", "<|im_end|>"
	AssistantStart             string // "<|im_start|>assistant\n"
	ResponseStart, ResponseEnd string // "<tool_response>", "</tool_response>"
}

// QwenTemplate is Qwen2/2.5's ChatML with Hermes tool responses.
func QwenTemplate() ChatTemplate {
	return ChatTemplate{TurnStart: "<|im_start|>", TurnEnd: "<|im_end|>", AssistantStart: "<|im_start|>assistant\n",
		ResponseStart: "<tool_response>", ResponseEnd: "</tool_response>"}
}

// Verifier checks trajectories. Decode renders token ids as text for the
// template checks; without it, or with a zero Template, they are skipped.
type Verifier struct {
	Template ChatTemplate
	Decode   func([]int32) string
	Stop     []int32 // the rollout's stop tokens; nil skips the stop check
}

// Trajectory checks t's record; i names it in the violation.
func (v *Verifier) Trajectory(i int, t *Trajectory) *Violation {
	bad := func(turn, tok int, format string, args ...any) *Violation {
		return &Violation{Traj: i, ID: t.Sample.ID, Turn: turn, Token: tok, What: fmt.Sprintf(format, args...)}
	}
	if len(t.Action) != len(t.Tokens) || len(t.LogProb) != len(t.Tokens) || t.PromptLen > len(t.Tokens) {
		return bad(-1, 0, "%d tokens, %d mask entries, %d log-probabilities, prompt of %d", len(t.Tokens), len(t.Action), len(t.LogProb), t.PromptLen)
	}
	runs := actionRuns(t.Action)
	turnOf := func(k int) int {
		for r, run := range runs {
			if k < run[1] {
				return r
			}
		}
		return len(runs)
	}
	for k, lp := range t.LogProb {
		switch a := t.Action[k]; {
		case a && k < t.PromptLen:
			return bad(-1, k, "a prompt token has action mask 1")
		case a && !(lp <= logProbSlack && !math.IsInf(float64(lp), 0)):
			return bad(turnOf(k), k, "action token with sampling log-probability %v", lp)
		case !a && lp != 0:
			return bad(turnOf(k), k, "environment token with a sampling log-probability %v", lp)
		}
	}
	for r, run := range runs {
		for k := run[0]; k < run[1]-1; k++ {
			if slices.Contains(v.Stop, t.Tokens[k]) {
				return bad(r, k, "stop token %d inside the turn: the rollout did not stop at it", t.Tokens[k])
			}
		}
	}
	if t.Steps != nil {
		if w := v.turns(t, runs, bad); w != nil {
			return w
		}
	}
	if v.Decode != nil && v.Template.TurnEnd != "" {
		return v.template(t, runs, bad)
	}
	return nil
}

// actionRuns returns the runs [start, end) of true entries of mask.
func actionRuns(mask []bool) [][2]int {
	var runs [][2]int
	for k := 0; k < len(mask); {
		if !mask[k] {
			k++
			continue
		}
		s := k
		for k < len(mask) && mask[k] {
			k++
		}
		runs = append(runs, [2]int{s, k})
	}
	return runs
}

type badFunc func(turn, tok int, format string, args ...any) *Violation

// turns checks a step-mode record's turns against its transcript.
func (v *Verifier) turns(t *Trajectory, runs [][2]int, bad badFunc) *Violation {
	if len(t.Steps) != len(runs) {
		return bad(min(len(t.Steps), len(runs)), 0, "%d turn samples for %d runs of action tokens in the transcript", len(t.Steps), len(runs))
	}
	var prev []int32
	for k, st := range t.Steps {
		if k == 0 {
			if !slices.Equal(st.Prompt, t.Tokens[:t.PromptLen]) {
				return bad(0, firstDiff(st.Prompt, t.Tokens[:t.PromptLen]), "turn 0's prompt is not the transcript's prompt")
			}
		} else if !st.Rewrite {
			if len(st.Prompt) < len(prev) || !slices.Equal(st.Prompt[:len(prev)], prev) {
				return bad(k, firstDiff(st.Prompt, prev), "the prompt neither extends the previous turn's prompt and response nor is a recorded rewrite")
			}
		}
		run := runs[k]
		if !slices.Equal(st.Response, t.Tokens[run[0]:run[1]]) {
			return bad(k, run[0]+firstDiff(st.Response, t.Tokens[run[0]:run[1]]), "the turn's response is not the tokens the transcript records as sampled")
		}
		if !slices.Equal(st.LogProb, t.LogProb[run[0]:run[1]]) {
			return bad(k, run[0]+firstDiffF(st.LogProb, t.LogProb[run[0]:run[1]]), "the turn's log-probabilities are not the sampler's")
		}
		prev = append(slices.Clone(st.Prompt), st.Response...)
	}
	return nil
}

func firstDiff(a, b []int32) int {
	for k := range min(len(a), len(b)) {
		if a[k] != b[k] {
			return k
		}
	}
	return min(len(a), len(b))
}

func firstDiffF(a, b []float32) int {
	for k := range min(len(a), len(b)) {
		if a[k] != b[k] {
			return k
		}
	}
	return min(len(a), len(b))
}

// chatText is a transcript's text in pieces: the prompt, each turn and
// the observation after it ("" when none), with the first token of each.
type chatText struct {
	prompt        string
	promptEnd     int
	turns, obs    []string
	turnAt, obsAt []int
}

// template decodes t's transcript in pieces and checks its chat markup.
func (v *Verifier) template(t *Trajectory, runs [][2]int, bad badFunc) *Violation {
	x := chatText{prompt: v.Decode(t.Tokens[:t.PromptLen]), promptEnd: t.PromptLen}
	for r, run := range runs {
		end := len(t.Tokens) // the observation after this turn: up to the next turn
		if r+1 < len(runs) {
			end = runs[r+1][0]
		}
		x.turns, x.turnAt = append(x.turns, v.Decode(t.Tokens[run[0]:run[1]])), append(x.turnAt, run[0])
		x.obs, x.obsAt = append(x.obs, v.Decode(t.Tokens[run[1]:end])), append(x.obsAt, run[1])
	}
	return v.Template.check(x, bad)
}

// check is the template checks over a transcript's pieces.
func (c ChatTemplate) check(x chatText, bad badFunc) *Violation {
	open := func(text string) bool { // an assistant turn is open at the end of text
		i := strings.LastIndex(text, c.AssistantStart)
		return i >= 0 && !strings.Contains(text[i+len(c.AssistantStart):], c.TurnStart) && !strings.Contains(text[i+len(c.AssistantStart):], c.TurnEnd)
	}
	if !open(x.prompt) {
		return bad(-1, x.promptEnd-1, "the prompt does not end in an open assistant turn (%q)", c.AssistantStart)
	}
	for r, text := range x.turns {
		obs := x.obs[r]
		if obs == "" {
			continue
		}
		if !strings.HasSuffix(text, c.TurnEnd) && !strings.HasPrefix(obs, c.TurnEnd) {
			return bad(r, x.obsAt[r], "the observation does not close the assistant turn it follows (%q)", c.TurnEnd)
		}
		if r+1 < len(x.turns) {
			if !open(obs) {
				return bad(r+1, x.turnAt[r+1]-1, "the observation before the turn does not leave an assistant turn open (%q)", c.AssistantStart)
			}
			// The tool's text inside may hold anything; the markup around
			// it is the environment's.
			if i, j := strings.Index(obs, c.ResponseStart), strings.LastIndex(obs, c.ResponseEnd); i < 0 || j < i {
				return bad(r, x.obsAt[r], "the observation has no %s … %s around its tool results", c.ResponseStart, c.ResponseEnd)
			}
		}
	}
	return nil
}

// Batch checks the packed batch b against the records it was packed from:
// trajectory j's sequences (Batch.Traj, or sequence j alone) carry exactly
// its action tokens, in order, each with its sampling log-probability.
func (v *Verifier) Batch(b *Batch, trajs []*Trajectory) *Violation {
	of, n, err := b.trajIndex()
	if err != nil || n != len(trajs) {
		return &Violation{Traj: -1, Turn: -1, What: fmt.Sprintf("the batch packs %d trajectories for %d records (%v)", n, len(trajs), err)}
	}
	next := make([]int, n) // each record's next action token
	for i := 0; i < b.NumSeqs(); i++ {
		j, t := of[i], trajs[of[i]]
		s, e := b.Seq(i)
		for p := s; p < e; p++ {
			if !b.ActionMask[p] {
				continue
			}
			k := next[j]
			for k < len(t.Tokens) && !t.Action[k] {
				k++
			}
			what := ""
			switch {
			case k == len(t.Tokens):
				what = "the batch trains a token the trajectory did not sample: mask 1 on an environment token"
			case b.Tokens[p] != t.Tokens[k]:
				what = fmt.Sprintf("the batch trains token %d where the policy sampled %d", b.Tokens[p], t.Tokens[k])
			case b.SampleLogProb[p] != float64(t.LogProb[k]):
				what = fmt.Sprintf("the batch's sampling log-probability %v is not the sampler's %v", b.SampleLogProb[p], t.LogProb[k])
			}
			if what != "" {
				return &Violation{Traj: j, ID: t.Sample.ID, Turn: max(len(actionRuns(t.Action[:min(k+1, len(t.Tokens))]))-1, 0), Token: k,
					What: fmt.Sprintf("%s (batch sequence %d, position %d)", what, i, p-s)}
			}
			next[j] = k + 1
		}
	}
	for j, t := range trajs {
		for k := next[j]; k < len(t.Tokens); k++ {
			if t.Action[k] {
				return &Violation{Traj: j, ID: t.Sample.ID, Turn: len(actionRuns(t.Action[:k])), Token: k,
					What: "a sampled token is not trained: mask 0 in the batch, or left out"}
			}
		}
	}
	return nil
}

// verifier is t.Verifier, or one that decodes with the rollout's tokenizer
// and skips the template checks.
func (t *Trainer) verifier() *Verifier {
	if t.Verifier != nil {
		return t.Verifier
	}
	v := &Verifier{}
	if t.Rollout != nil && t.Rollout.Tok != nil {
		tok := t.Rollout.Tok
		v.Decode = func(ids []int32) string { return tok.Decode(toInts(ids)) }
	}
	return v
}

// verifyRecords checks the step's trajectories (rollout.verify): a
// violation fails the step, or in drop mode removes the trajectory (and
// its baseline entry) and counts it in verify/dropped.
func (t *Trainer) verifyRecords(trajs []*Trajectory, baseline []float64, m Metrics) ([]*Trajectory, []float64, error) {
	mode := t.Cfg.Rollout.Verify
	if mode == VerifyOff {
		return trajs, baseline, nil
	}
	v := t.verifier()
	var keep []*Trajectory
	var keepBase []float64
	dropped := 0
	for i, tr := range trajs {
		if w := v.Trajectory(i, tr); w != nil {
			if mode != VerifyDrop {
				return nil, nil, w
			}
			dropped++
			continue
		}
		keep = append(keep, tr)
		if baseline != nil {
			keepBase = append(keepBase, baseline[i])
		}
	}
	if mode == VerifyDrop {
		m["verify/dropped"] = float64(dropped)
		if dropped > 0 && len(keep) == 0 {
			return nil, nil, fmt.Errorf("rl: rollout.verify=drop dropped all %d trajectories of the step (in data parallel, of this process's share)", len(trajs))
		}
		return keep, keepBase, nil
	}
	return trajs, baseline, nil
}

// verifyBatch checks the packed batch against the records; a violation
// there is the packer's, never the trajectory's, so it always fails.
func (t *Trainer) verifyBatch(b *Batch, trajs []*Trajectory) error {
	if t.Cfg.Rollout.Verify == VerifyOff {
		return nil
	}
	if w := t.verifier().Batch(b, trajs); w != nil {
		return w
	}
	return nil
}
