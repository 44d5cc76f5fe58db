package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/rl"
)

func record(index int, adv *float64) rl.DumpRecord {
	p, a1, o, a2 := "<|im_start|>user\nwhat is alpha?<|im_end|>\n", "<tool_call>{\"query\": \"alpha\"}</tool_call>",
		"<|im_start|>user\n<tool_response>alpha is gamma</tool_response><|im_end|>\n", "<answer>gamma</answer><|im_end|>"
	text := p + a1 + o + a2
	at := 0
	var spans []rl.Span
	tok := 0
	for _, s := range []struct{ kind, text string }{{rl.SpanPrompt, p}, {rl.SpanAction, a1}, {rl.SpanObservation, o}, {rl.SpanAction, a2}} {
		spans = append(spans, rl.Span{Kind: s.kind, Start: at, End: at + len(s.text), TokenStart: tok, TokenEnd: tok + 10})
		at += len(s.text)
		tok += 10
	}
	return rl.DumpRecord{Step: 3, Index: index, Question: "what is alpha?", Answers: []string{"gamma"},
		Text: text, Spans: spans, Reward: 1, Metrics: map[string]float64{"em": 1, "f1": 1}, Advantage: adv, Finish: "answer", Turns: 2, NumToolCalls: 1,
		PromptTokens: 10, ActionTokens: 20, ObsTokens: 10}
}

func TestRenderMarksActionSpans(t *testing.T) {
	adv := 0.75
	path := filepath.Join(t.TempDir(), "step_3.jsonl")
	if err := rl.WriteDump(path, []rl.DumpRecord{record(0, nil), record(1, &adv)}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, path, 1, false, false, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"step 3, trajectory 1",
		"advantage  +0.750",
		"[prompt: tokens 0-10, not shown",
		"▶ action: tokens 10-20, mask 1\n<tool_call>{\"query\": \"alpha\"}</tool_call>\n◀",
		"· observation: tokens 20-30, mask 0\n<|im_start|>user\n<tool_response>alpha is gamma",
		"▶ action: tokens 30-40, mask 1\n<answer>gamma</answer><|im_end|>\n◀",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "what is alpha?<|im_end|>") {
		t.Error("the prompt was printed without -prompt")
	}
	out.Reset()
	run(&out, path, 1, false, true, true)
	if !strings.Contains(out.String(), green+"<answer>gamma</answer><|im_end|>"+reset) || !strings.Contains(out.String(), "what is alpha?<|im_end|>") {
		t.Errorf("colour output:\n%q", out.String())
	}
	out.Reset()
	if err := run(&out, path, 0, true, false, false); err != nil || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("list: %v\n%s", err, out.String())
	}
	if err := run(&out, path, 9, false, false, false); err == nil || !strings.Contains(err.Error(), "no trajectory 9") {
		t.Errorf("missing index: %v", err)
	}
}

// withTokens gives record's 40 tokens their ids, mask and log-probs.
func withTokens(r rl.DumpRecord) rl.DumpRecord {
	for k := 0; k < 40; k++ {
		act := k >= 10 && k < 20 || k >= 30
		r.Tokens, r.Action = append(r.Tokens, int32(k+1)), append(r.Action, act)
		lp := float32(0)
		if act {
			lp = -0.5
		}
		r.LogProbs = append(r.LogProbs, lp)
	}
	return r
}

// TestVerify: -verify passes a consistent dump and names the trajectory,
// turn and token of an environment token that carries a log-probability.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.jsonl"), filepath.Join(dir, "bad.jsonl")
	broken := withTokens(record(1, nil))
	broken.LogProbs[25] = -1
	if err := rl.WriteDump(good, []rl.DumpRecord{withTokens(record(0, nil)), withTokens(record(1, nil))}); err != nil {
		t.Fatal(err)
	}
	if err := rl.WriteDump(bad, []rl.DumpRecord{withTokens(record(0, nil)), broken}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := verifyFile(&out, good); err != nil || !strings.Contains(out.String(), "2 trajectories verified") {
		t.Errorf("good dump: %v\n%s", err, out.String())
	}
	out.Reset()
	err := verifyFile(&out, bad)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 trajectories fail") ||
		!strings.Contains(out.String(), "trajectory 1 (), turn 1, token 25: environment token with a sampling log-probability -1") {
		t.Errorf("bad dump: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := verifyFile(&out, func() string {
		p := filepath.Join(dir, "old.jsonl")
		rl.WriteDump(p, []rl.DumpRecord{record(0, nil)})
		return p
	}()); err == nil || !strings.Contains(out.String(), "no tokens") {
		t.Errorf("a dump without tokens: %v\n%s", err, out.String())
	}
}
