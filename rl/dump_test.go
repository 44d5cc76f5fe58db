package rl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

// TestDumpRecordsSpansAndAdvantages dumps a real two-call rollout and
// checks the record against the trajectory: the spans tile the text in
// the action mask's runs, the action spans are the policy's turns, the
// tool calls and observations are extracted, the advantages come from the
// batch, and the file reads back.
func TestDumpRecordsSpansAndAdvantages(t *testing.T) {
	f := newRolloutFixture(t)
	turns := [][]int32{f.enc(callAlpha), f.enc(callBeta), f.enc(answer)}
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 2, maxLen: 4096, tok: f.tok,
		scripts: map[string][][]int32{"alpha": turns}, state: make([]slotState, 2)}
	cfg := testRolloutConfig()
	cfg.N = 2
	r := f.rollout(t, cfg, env.DefaultConfig(), p, echoTool{})
	trajs, err := r.Run(context.Background(), 0, []data.Sample{{ID: "s1", DataSource: "toy", Question: "what is alpha?", Answers: []string{"gamma"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := FromTrajectories(trajs, true)
	b.Advantages = make([]float64, len(b.Tokens))
	for i := range trajs {
		for k := b.Offsets[i] + trajs[i].PromptLen; k < b.Offsets[i+1]; k++ {
			if b.ActionMask[k] {
				b.Advantages[k] = float64(i) + 0.5
			}
		}
	}
	recs := DumpRecords(7, trajs, SplitAdvantages(b), f.tok)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	rec := recs[1]
	if rec.Step != 7 || rec.Index != 1 || rec.Question != "what is alpha?" || rec.Metrics["em"] != 1 || rec.Finish != "answer" {
		t.Fatalf("record header %+v", rec)
	}
	if rec.Advantage == nil || *rec.Advantage != 1.5 || rec.AdvantageMean == nil || *rec.AdvantageMean != 1.5 {
		t.Fatalf("advantage %v mean %v, want 1.5", rec.Advantage, rec.AdvantageMean)
	}
	if err := rec.checkSpans(); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var actions []string
	for _, s := range rec.Spans {
		kinds = append(kinds, s.Kind)
		for k := s.TokenStart; k < s.TokenEnd; k++ {
			if trajs[1].Action[k] != (s.Kind == SpanAction) {
				t.Fatalf("token %d in a %s span has action %v", k, s.Kind, trajs[1].Action[k])
			}
		}
		if s.Kind == SpanAction {
			actions = append(actions, rec.Text[s.Start:s.End])
		}
	}
	if got := strings.Join(kinds, " "); got != "prompt action observation action observation action" {
		t.Fatalf("span kinds %q", got)
	}
	if actions[0] != callAlpha || actions[2] != answer {
		t.Fatalf("action spans %q, want the scripted turns", actions)
	}
	if len(rec.ToolCalls) != 2 || !strings.Contains(rec.ToolCalls[1], `"query": "beta"`) {
		t.Fatalf("tool calls %q", rec.ToolCalls)
	}
	if len(rec.Obs) != 2 || !strings.Contains(rec.Obs[0], "result for alpha") {
		t.Fatalf("observations %q", rec.Obs)
	}
	if rec.PromptTokens+rec.ActionTokens+rec.ObsTokens != len(trajs[1].Tokens) {
		t.Fatal("token counts do not add up")
	}

	path := filepath.Join(t.TempDir(), "rollouts", "step_7.jsonl")
	if err := WriteDump(path, recs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDump(path)
	if err != nil || len(back) != 2 || back[1].Text != rec.Text {
		t.Fatalf("read back %d records: %v", len(back), err)
	}
	// Validation records carry no advantage.
	val := DumpRecords(0, trajs[:1], nil, f.tok)
	raw, _ := json.Marshal(val[0])
	if strings.Contains(string(raw), "advantage") {
		t.Fatalf("validation record has an advantage: %s", raw)
	}
}

// ReadDump names the line of a bad record: malformed JSON, or spans that
// do not tile the text.
func TestReadDumpBadLines(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"json":  `{"step":1,"text":"ab","spans":[{"kind":"prompt","start":0,"end":2}]}` + "\n{not json\n",
		"gap":   `{"step":1,"text":"abc","spans":[{"kind":"prompt","start":0,"end":1},{"kind":"action","start":2,"end":3}]}` + "\n",
		"kind":  `{"step":1,"text":"ab","spans":[{"kind":"tool","start":0,"end":2}]}` + "\n",
		"short": `{"step":1,"text":"abc","spans":[{"kind":"prompt","start":0,"end":2}]}` + "\n",
	} {
		path := filepath.Join(dir, name+".jsonl")
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := ReadDump(path); err == nil || !strings.Contains(err.Error(), path+":") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReadDump: any file either reads, with every record's spans tiling
// its text, or fails with an error naming the file and line; never panics.
func FuzzReadDump(f *testing.F) {
	f.Add([]byte(`{"step":1,"text":"ab","spans":[{"kind":"prompt","start":0,"end":1},{"kind":"action","start":1,"end":2}]}` + "\n"))
	f.Add([]byte(`{"step":1,"text":"","spans":[]}` + "\n\n{"))
	f.Add([]byte(`{"text":"abc","spans":[{"kind":"observation","start":0,"end":9}]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(dir, "f.jsonl")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadDump(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range recs {
			at := 0
			for _, s := range r.Spans {
				if s.Start != at || s.End < s.Start || s.End > len(r.Text) {
					t.Fatalf("accepted spans %+v for a %d-byte text", r.Spans, len(r.Text))
				}
				at = s.End
			}
			if at != len(r.Text) {
				t.Fatalf("accepted spans ending at %d of %d", at, len(r.Text))
			}
		}
	})
}
