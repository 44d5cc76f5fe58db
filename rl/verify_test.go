package rl

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/env"
)

func (f stepFixture) verifier() *Verifier {
	return &Verifier{Template: QwenTemplate(), Decode: func(ids []int32) string { return f.tok.Decode(toInts(ids)) }, Stop: f.stop}
}

// cloneTraj copies the slices the mutations below write to.
func cloneTraj(t *Trajectory) *Trajectory {
	c := *t
	c.Tokens, c.Action, c.LogProb = slices.Clone(t.Tokens), slices.Clone(t.Action), slices.Clone(t.LogProb)
	c.Steps = slices.Clone(t.Steps)
	for k := range c.Steps {
		c.Steps[k].Prompt = slices.Clone(t.Steps[k].Prompt)
		c.Steps[k].Response = slices.Clone(t.Steps[k].Response)
		c.Steps[k].LogProb = slices.Clone(t.Steps[k].LogProb)
	}
	return &c
}

// TestVerifierPassesRollouts: whole and step-mode rollouts, and the
// batches packed from them, pass every check.
func TestVerifierPassesRollouts(t *testing.T) {
	f := newStepFixture(t)
	v := f.verifier()
	for _, c := range []struct {
		trajectory string
		ctx        env.ContextConfig
	}{
		{TrajectoryWhole, fullContext}, {TrajectoryStep, fullContext},
		{TrajectoryStep, env.ContextConfig{Policy: env.ContextWindow, Turns: 1}},
		{TrajectoryStep, env.ContextConfig{Policy: env.ContextDropObservations, Turns: 1}},
	} {
		trajs, _ := f.run(t, c.trajectory, c.ctx)
		for i, tr := range trajs {
			if w := v.Trajectory(i, tr); w != nil {
				t.Fatalf("%s %s: %v", c.trajectory, c.ctx.Policy, w)
			}
		}
		b := FromTrajectories(trajs, true)
		if c.trajectory == TrajectoryStep {
			var err error
			if b, _, err = FromSteps(trajs, true, true); err != nil {
				t.Fatal(err)
			}
		}
		if w := v.Batch(b, trajs); w != nil {
			t.Fatalf("%s %s batch: %v", c.trajectory, c.ctx.Policy, w)
		}
	}
}

// TestVerifierNamesViolations breaks one thing at a time and checks the
// verifier names it, with its turn and token.
func TestVerifierNamesViolations(t *testing.T) {
	f := newStepFixture(t)
	v := f.verifier()
	whole, _ := f.run(t, TrajectoryWhole, fullContext)
	step, _ := f.run(t, TrajectoryStep, env.ContextConfig{Policy: env.ContextWindow, Turns: 1})
	a := whole[0] // alpha: three turns
	runs := actionRuns(a.Action)
	obs1 := runs[1][1] // the first token of the observation after turn 1
	for _, c := range []struct {
		name   string
		base   *Trajectory
		break_ func(t *Trajectory)
		turn   int
		token  int
		want   string
	}{
		{"NaN log-prob", a, func(t *Trajectory) { t.LogProb[runs[2][0]+1] = float32(math.NaN()) }, 2, runs[2][0] + 1, "action token with sampling log-probability NaN"},
		{"positive log-prob", a, func(t *Trajectory) { t.LogProb[runs[0][0]] = 0.5 }, 0, runs[0][0], "log-probability 0.5"},
		{"the policy writes a turn marker", a, func(t *Trajectory) { t.Tokens[runs[1][0]] = f.enc("<|im_start|>")[0] }, -2, 0, ""},
		{"env token with a log-prob", a, func(t *Trajectory) { t.LogProb[obs1] = -1 }, 2, obs1, "environment token with a sampling log-probability"},
		{"env token sampled", a, func(t *Trajectory) { t.Action[a.PromptLen-1] = true }, -1, a.PromptLen - 1, "prompt token has action mask 1"},
		{"turn goes on past a stop token", a, func(t *Trajectory) { t.Tokens[runs[1][0]] = f.stop[1] }, 1, runs[1][0], "stop token"},
		{"observation leaves no assistant turn", a, func(t *Trajectory) {
			t.Tokens[runs[2][0]-1] = f.stop[1] // an <|im_end|> after the assistant turn opened
		}, 2, runs[2][0] - 1, "does not leave an assistant turn open"},
		{"turn not in the transcript", step[0], func(t *Trajectory) { t.Steps[1].Response[3]++ }, 1, 0, "not the tokens the transcript records"},
		{"turn log-probs not the sampler's", step[0], func(t *Trajectory) { t.Steps[2].LogProb[0] -= 0.25 }, 2, 0, "not the sampler's"},
		{"unrecorded rewrite", step[0], func(t *Trajectory) { t.Steps[2].Rewrite = false }, 2, 0, "nor is a recorded rewrite"},
	} {
		tr := cloneTraj(c.base)
		c.break_(tr)
		w := v.Trajectory(4, tr)
		if c.want == "" { // the policy's own text: not a violation
			if w != nil {
				t.Errorf("%s: %v", c.name, w)
			}
			continue
		}
		if w == nil {
			t.Errorf("%s: no violation", c.name)
			continue
		}
		if !strings.Contains(w.Error(), c.want) || w.Traj != 4 || w.Turn != c.turn || (c.token > 0 && w.Token != c.token) {
			t.Errorf("%s: %v (turn %d token %d), want %q at turn %d token %d", c.name, w, w.Turn, w.Token, c.want, c.turn, c.token)
		}
	}
}

// TestVerifierBatch: a batch that trains an environment token, leaves a
// sampled token out or carries another log-probability is caught.
func TestVerifierBatch(t *testing.T) {
	f := newStepFixture(t)
	v := f.verifier()
	step, _ := f.run(t, TrajectoryStep, env.ContextConfig{Policy: env.ContextDropObservations, Turns: 1})
	fresh := func() *Batch {
		b, _, err := FromSteps(step, true, true)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	firstObs := func(b *Batch) int { // the first environment token after an action token
		for k := 1; k < b.NumTokens(); k++ {
			if b.ActionMask[k-1] && !b.ActionMask[k] {
				return k
			}
		}
		return -1
	}
	for _, c := range []struct {
		name   string
		break_ func(b *Batch)
		want   string
	}{
		{"mask 1 on an environment token", func(b *Batch) { b.ActionMask[firstObs(b)] = true }, "trains token"},
		{"mask 0 on a sampled token", func(b *Batch) { b.ActionMask[firstObs(b)-1] = false }, "trains token"},
		{"last sampled token left out", func(b *Batch) { b.ActionMask[b.NumTokens()-1] = false }, "is not trained"},
		{"log-probability changed", func(b *Batch) { b.SampleLogProb[firstObs(b)-1] += 1e-3 }, "not the sampler's"},
	} {
		b := fresh()
		c.break_(b)
		if w := v.Batch(b, step); w == nil || !strings.Contains(w.Error(), c.want) {
			t.Errorf("%s: %v, want a violation naming %q", c.name, w, c.want)
		}
	}
}

// TestVerifyDrop: rollout.verify=drop removes a violating trajectory and
// counts it; fail names it; off lets it through.
func TestVerifyDrop(t *testing.T) {
	f := newStepFixture(t)
	trajs, _ := f.run(t, TrajectoryWhole, fullContext)
	trajs[2] = cloneTraj(trajs[2])
	trajs[2].LogProb[trajs[2].PromptLen-1] = -3 // a prompt token with a log-prob
	for _, c := range []struct {
		mode string
		keep int
		err  string
	}{{VerifyDrop, 5, ""}, {VerifyFail, 0, "trajectory 2 (a)"}, {VerifyOff, 6, ""}} {
		tr := &Trainer{Cfg: DefaultTrainerConfig(), Verifier: f.verifier()}
		tr.Cfg.Rollout.Verify = c.mode
		m := Metrics{}
		kept, _, err := tr.verifyRecords(trajs, nil, m)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error naming %q", c.mode, err, c.err)
			}
			continue
		}
		if err != nil || len(kept) != c.keep {
			t.Errorf("%s: kept %d (%v), want %d", c.mode, len(kept), err, c.keep)
		}
		if c.mode == VerifyDrop && m["verify/dropped"] != 1 {
			t.Errorf("drop: verify/dropped %v", m["verify/dropped"])
		}
	}
}

// TestVerifyDump: a dump written from step-mode trajectories verifies;
// one whose transcript was edited names the trajectory.
func TestVerifyDump(t *testing.T) {
	f := newStepFixture(t)
	step, _ := f.run(t, TrajectoryStep, env.ContextConfig{Policy: env.ContextWindow, Turns: 1})
	recs := DumpRecords(0, step, nil, f.tok)
	path := filepath.Join(t.TempDir(), "step_0.jsonl")
	if err := WriteDump(path, recs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDump(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range back {
		tmpl := DumpTemplate(&back[i])
		if tmpl.TurnEnd == "" {
			t.Fatal("a ChatML dump was not recognised")
		}
		if w := VerifyRecord(&back[i], tmpl); w != nil {
			t.Fatalf("record %d: %v", i, w)
		}
	}
	back[1].Steps[1].Response[0]++
	if w := VerifyRecord(&back[1], QwenTemplate()); w == nil || w.Traj != 1 || w.Turn != 1 {
		t.Errorf("edited turn: %v", w)
	}
}

// FuzzVerifyRecord feeds arbitrary dump lines to what cmd/rollouts -verify
// does with them: a record that reads must verify or be refused, never
// panic, whatever its tokens, masks, spans and turn samples claim.
func FuzzVerifyRecord(f *testing.F) {
	f.Add([]byte(`{"index":0,"text":"<|im_start|>assistant\nab","spans":[{"kind":"prompt","start":0,"end":22,"token_start":0,"token_end":2},{"kind":"action","start":22,"end":24,"token_start":2,"token_end":3}],"tokens":[1,2,3],"action":[false,false,true],"logprobs":[0,0,-0.5]}`))
	f.Add([]byte(`{"tokens":[1,2,3,4],"action":[false,true,false,true],"logprobs":[0,-1,0,-1],"spans":[{"kind":"prompt","start":0,"end":0,"token_start":0,"token_end":9}],"turn_samples":[{"prompt":[1],"response":[2],"logprobs":[-1]},{"prompt":[],"response":[4,5],"logprobs":[-1]}]}`))
	f.Add([]byte(`{"tokens":[7],"action":[true,true],"logprobs":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var r DumpRecord
		if json.Unmarshal(line, &r) != nil || r.checkSpans() != nil {
			return // ReadDump refuses it before the verifier
		}
		VerifyRecord(&r, QwenTemplate())
		VerifyRecord(&r, DumpTemplate(&r))
	})
}

// TestTemplateToolResponseTags: an observation that a turn follows must
// wrap its tool results in the tool-response tags, whatever the results
// hold.
func TestTemplateToolResponseTags(t *testing.T) {
	q := QwenTemplate()
	bad := func(turn, tok int, format string, args ...any) *Violation {
		return &Violation{Turn: turn, Token: tok, What: fmt.Sprintf(format, args...)}
	}
	x := func(obs string) chatText {
		return chatText{prompt: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n", promptEnd: 5,
			turns: []string{"<tool_call>{}</tool_call>", "<answer>a</answer><|im_end|>"}, turnAt: []int{5, 20},
			obs: []string{obs, ""}, obsAt: []int{9, 30}}
	}
	ok := "<|im_end|>\n<|im_start|>user\n<tool_response>\nit says </tool_response> twice </tool_response><|im_end|>\n<|im_start|>assistant\n"
	if w := q.check(x(ok), bad); w != nil {
		t.Errorf("a tool result holding the closing tag: %v", w)
	}
	if w := q.check(x("<|im_end|>\n<|im_start|>user\nno tags<|im_end|>\n<|im_start|>assistant\n"), bad); w == nil || w.Turn != 0 || w.Token != 9 {
		t.Errorf("an observation without tags: %v", w)
	}
}
