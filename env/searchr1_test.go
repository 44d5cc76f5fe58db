package env

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
)

// The action parser, the turn cut and the answer extraction against
// Search-R1's own regexes run by Python (testdata/searchr1_actions.py).
func TestSearchR1ParsingMatchesPython(t *testing.T) {
	raw, err := os.ReadFile("testdata/searchr1_actions.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Turns []struct {
			Turn, Cut, Action, Content string
			RawAction                  string `json:"raw_action"`
			RawContent                 string `json:"raw_content"`
		}
		Texts []struct {
			Text   string
			Answer *string
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	for _, c := range ref.Turns {
		if got := CutSearchR1Turn(c.Turn); got != c.Cut {
			t.Errorf("cut %q = %q, Python %q", c.Turn, got, c.Cut)
		}
		if a, content := ParseSearchR1Action(c.Cut); a != c.Action || content != c.Content {
			t.Errorf("action of %q = %q %q, Python %q %q", c.Cut, a, content, c.Action, c.Content)
		}
		if a, content := ParseSearchR1Action(c.Turn); a != c.RawAction || content != c.RawContent {
			t.Errorf("uncut action of %q = %q %q, Python %q %q", c.Turn, a, content, c.RawAction, c.RawContent)
		}
	}
	for _, c := range ref.Texts {
		a, ok := SearchR1Answer(c.Text)
		if ok != (c.Answer != nil) || (ok && a != *c.Answer) {
			t.Errorf("answer of %q = %q %v, Python %v", c.Text, a, ok, c.Answer)
		}
	}
	if len(ref.Turns) < 10 || len(ref.Texts) < 4 {
		t.Fatal("reference too short")
	}
}

// searchR1Fixture exports a small synthetic world in Search-R1's parquet
// layout and wiki-18 corpus, loads the train file as a user's would be
// loaded, and indexes the corpus.
func searchR1Fixture(t *testing.T) (*synth.World, []data.Sample, *Index) {
	t.Helper()
	cfg := synth.DefaultConfig()
	cfg.Train, cfg.Validation, cfg.Test = 40, 5, 5
	w, err := synth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := w.Export(dir, data.ParquetLayout{Style: data.StyleSearchR1}); err != nil {
		t.Fatal(err)
	}
	samples, _, err := data.Load(filepath.Join(dir, "train.parquet"), data.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix, _, _, err := OpenOrBuildIndex(filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "corpus.bm25"), data.CorpusOptions{}, BuildOptions{}, DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return w, samples, ix
}

// A gold Search-R1-format episode over the project's own Search-R1-style
// files: every <search> is executed against the corpus and its passages
// come back in <information>, and the <answer> is scored by Search-R1's EM.
func TestSearchR1GoldEpisode(t *testing.T) {
	w, samples, ix := searchR1Fixture(t)
	byID := map[string]data.Sample{}
	for _, s := range samples {
		byID[s.ID] = s
	}
	e, err := NewSearchR1(ix, SearchR1Config(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPromptStyle(StyleSearchR1, "train.parquet", samples); err != nil {
		t.Fatal(err)
	}
	m := QwenMarkup()
	episodes := 0
	for _, gold := range w.Train {
		if gold.Gold == nil || len(gold.Gold.Steps) < 2 {
			continue
		}
		s, ok := byID[gold.ID]
		if !ok {
			t.Fatalf("sample %s not in the parquet file", gold.ID)
		}
		ep := e.NewEpisode()
		msgs, tools := ep.Reset(s)
		if tools != nil || len(msgs) != 1 || !strings.Contains(msgs[0].Content, "<search> query </search>") {
			t.Fatalf("reset: %q %v", msgs, tools)
		}
		text := m.UserStart + msgs[0].Content + m.TurnEnd + "\n" + m.AssistantStart
		for i, st := range gold.Gold.Steps {
			turn := "<think>" + st.Thought + "</think>\n<search> " + st.Query + " </search>"
			res := ep.Step(context.Background(), turn)
			if res.Done || !res.Info.Success || len(res.Info.Calls) != 1 || !strings.HasPrefix(res.Observation, "\n\n<information>Doc 1(Title: ") || !strings.HasSuffix(res.Observation, "</information>\n\n") {
				t.Fatalf("%s step %d: %+v", s.ID, i, res)
			}
			// The passage the gold step relies on was retrieved.
			var evidence data.Passage
			for _, p := range w.Passages {
				if p.ID == st.Evidence {
					evidence = p
				}
			}
			_, body, _ := strings.Cut(evidence.Contents, "\n")
			if evidence.ID == "" || !strings.Contains(res.Observation, body) || !strings.Contains(res.Observation, st.Found) {
				t.Fatalf("%s step %d: query %q did not bring passage %s (%q): %q", s.ID, i, st.Query, st.Evidence, body, res.Observation)
			}
			text += turn + res.Observation
		}
		final := "<think>" + gold.Gold.FinalThought + "</think>\n<answer> " + gold.Gold.Answer + " </answer>"
		res := ep.Step(context.Background(), final+" trailing text the rollout would have cut")
		if !res.Done || res.Observation != "" || !ep.Done() {
			t.Fatalf("answer step: %+v", res)
		}
		text += final + m.TurnEnd
		sc := ep.Score(text)
		if sc.Score != 1 || sc.EM != 1 || !sc.HasAnswer || sc.Answer != gold.Gold.Answer {
			t.Fatalf("%s: scores %+v, want EM 1 on %q", s.ID, sc, gold.Gold.Answer)
		}
		// The same episode with a wrong answer scores 0.
		wrong := strings.Replace(text, "<answer> "+gold.Gold.Answer+" </answer>", "<answer> Nobody </answer>", 1)
		if sc := ep.Score(wrong); sc.Score != 0 || sc.EM != 0 || sc.Answer != "Nobody" {
			t.Fatalf("wrong answer scores %+v", sc)
		}
		episodes++
		if episodes == 3 {
			break
		}
	}
	if episodes == 0 {
		t.Fatal("no multi-hop gold trajectory in the fixture")
	}
	if st := e.ToolStats().Take(); st.Calls == 0 || st.Errors != 0 || st.Invalid != 0 {
		t.Errorf("tool stats %+v", st)
	}
}

func TestSearchR1InvalidActionAndTurnLimit(t *testing.T) {
	_, samples, ix := searchR1Fixture(t)
	cfg := SearchR1Config()
	cfg.MaxTurns = 2
	e, err := NewSearchR1(ix, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(samples[0])
	res := ep.Step(context.Background(), "<think>hmm</think> I will call search(query)")
	if res.Done || res.Observation != SearchR1InvalidAction || res.Info.Success || res.Info.ErrorKind != ErrInvalidAction {
		t.Fatalf("invalid: %+v", res)
	}
	res = ep.Step(context.Background(), "<search>   </search>")
	if res.Done || res.Info.Calls[0].ErrorKind != ErrInvalidArguments || !strings.Contains(res.Observation, "<information>Error: empty query</information>") {
		t.Fatalf("blank query: %+v", res)
	}
	// Turn 3 is past max_turns=2: Search-R1 generates it with search off
	// and ends the episode.
	res = ep.Step(context.Background(), "<search> one more </search>")
	if !res.Done || res.Observation != "" || !res.Info.MaxTurns || len(res.Info.Calls) != 0 {
		t.Fatalf("final turn: %+v", res)
	}
	if st := e.ToolStats().Take(); st.Calls != 1 || st.Invalid != 1 {
		t.Errorf("stats %+v", st)
	}
	if _, err := NewSearchR1(ix, DefaultConfig(), 3); err == nil {
		t.Error("agent-r1 config accepted by NewSearchR1")
	}
	if _, err := New(cfg); err == nil {
		t.Error("New accepted the search-r1 style, which has no tool set")
	}
}

// A dataset asking for one protocol under an env expecting another is
// refused at load, naming the files, the count and the fix.
func TestCheckPromptStyle(t *testing.T) {
	_, samples, _ := searchR1Fixture(t)
	err := CheckPromptStyle(StyleAgentR1, "train.parquet", samples)
	if err == nil || !strings.Contains(err.Error(), "train.parquet") || !strings.Contains(err.Error(), "set env.style=search-r1") || !strings.Contains(err.Error(), "40 of 40") {
		t.Fatalf("search-r1 data under agent-r1: %v", err)
	}
	if err := CheckPromptStyle(StyleVerl, "x", samples); err == nil {
		t.Error("search-r1 data under verl accepted")
	}
	hermes := []data.Sample{{ID: "a:1", Prompt: []data.Message{{Role: "system", Content: "Call tools as <tool_call>{...}</tool_call>."}, {Role: "user", Content: "q"}}}}
	if err := CheckPromptStyle(StyleSearchR1, "h.parquet", hermes); err == nil || !strings.Contains(err.Error(), "set env.style=agent-r1") {
		t.Errorf("hermes data under search-r1: %v", err)
	}
	if err := CheckPromptStyle(StyleAgentR1, "h.parquet", hermes); err != nil {
		t.Error(err)
	}
	// Prompts that name neither protocol (Agent-R1's own: tools come from
	// the chat template) pass under any style.
	plain := []data.Sample{{ID: "p:1", Prompt: []data.Message{{Role: "user", Content: "Question: q\n" + AgentR1Instruction}}}, {ID: "p:2"}}
	for _, st := range []Style{StyleAgentR1, StyleVerl, StyleSearchR1} {
		if err := CheckPromptStyle(st, "p", plain); err != nil {
			t.Errorf("%s: %v", st, err)
		}
	}
}

func TestStopHit(t *testing.T) {
	for turn, want := range map[string]bool{"<search> q </search>": true, "<search> q </search>\n": true, "<answer> a </answer>": true, "<search> q </sear": false, "": false} {
		if StopHit(turn, SearchR1StopStrings) != want {
			t.Errorf("%q: want %v", turn, want)
		}
	}
}
