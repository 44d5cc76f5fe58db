package rl

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// recordingRetriever answers every query with one passage naming it and
// records the queries.
type recordingRetriever struct {
	mu      sync.Mutex
	queries []string
}

func (r *recordingRetriever) Retrieve(_ context.Context, queries []string, k int) ([][]env.Hit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, queries...)
	out := make([][]env.Hit, len(queries))
	for i, q := range queries {
		out[i] = []env.Hit{{Passage: data.Passage{ID: "1", Title: q, Contents: q + "\n" + q + " is gamma"}}}
	}
	return out, nil
}

// TestRolloutStopsAtStopStrings runs a Search-R1 episode with a scripted
// policy whose turns go on past "</search>" and "</answer>" (multi-token
// stop strings, the second ending inside a token that carries more text):
// each turn must end at the token completing its stop string, the search
// must run on the query, the answer must be scored, and the tokens must be
// the sampled ones, never re-encoded.
func TestRolloutStopsAtStopStrings(t *testing.T) {
	corpus := []string{strings.Repeat("<search> alpha </search>xyz <answer> gamma </answer>xyz ", 20),
		data.SearchR1Prompt("what is alpha"), "<information> Doc 1(Title: alpha) alpha is gamma </information>"}
	tok, err := tokenizer.Train(corpus, 500, tokenizer.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) []int32 { return toInt32(tok.Encode(s)) }
	turn1 := enc("I search. <search> alpha </search>\n\nJUNK JUNK")
	turn2 := enc("<answer> gamma </answer>xyz JUNK")
	// The stop must fall inside the token ">xyz" of the second turn.
	crossing := slices.IndexFunc(turn2, func(id int32) bool { return tok.Decode([]int{int(id)}) == ">xyz" })
	if crossing < 0 {
		t.Fatalf("the fixture tokenizer has no token >xyz: %v", turn2)
	}
	cut1 := 1
	for !strings.Contains(tok.Decode(toInts(turn1[:cut1])), "</search>") {
		cut1++
	}
	pol := &scriptedPolicy{vocab: tok.VocabSize(), slots: 2, maxLen: 2048, tok: tok,
		scripts: map[string][][]int32{"alpha": {turn1, turn2}}, state: make([]slotState, 2)}
	ret := &recordingRetriever{}
	cfg := env.SearchR1Config()
	e, err := env.NewSearchR1(ret, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	ro := &Rollout{Policy: pol, Tok: tok, Env: e, Stop: []int32{int32(imEnd)}, Cfg: &RolloutConfig{N: 1, Slots: 1,
		Sampling: model.Greedy, MaxTurnTokens: 64, MaxResponseTokens: 512, MaxPromptTokens: 1024, ToolConcurrency: 1}}
	trajs, err := ro.Run(context.Background(), 0, []data.Sample{{ID: "q1", Question: "what is alpha", Answers: []string{"gamma"}}})
	if err != nil {
		t.Fatal(err)
	}
	tr := trajs[0]
	if !slices.Equal(ret.queries, []string{"alpha"}) {
		t.Errorf("queries %q, want [alpha]", ret.queries)
	}
	if tr.ToolCalls != 1 || tr.Turns != 2 || tr.Finish != FinishAnswer {
		t.Errorf("tool calls %d, turns %d, finish %s; want 1, 2, answer", tr.ToolCalls, tr.Turns, tr.Finish)
	}
	if tr.Outcome.Reward != 1 || tr.Outcome.Metrics["em"] != 1 {
		t.Errorf("outcome %+v, want reward 1 and em 1", tr.Outcome)
	}
	// The sampled tokens, as sampled: turn 1 up to the token closing
	// </search>, turn 2 up to and including ">xyz".
	var sampled []int32
	for i, a := range tr.Action {
		if a {
			sampled = append(sampled, tr.Tokens[i])
		}
	}
	want := append(slices.Clone(turn1[:cut1]), turn2[:crossing+1]...)
	if !slices.Equal(sampled, want) {
		t.Errorf("sampled tokens %q,\nwant %q", tok.Decode(toInts(sampled)), tok.Decode(toInts(want)))
	}
	text := tok.Decode(toInts(tr.Tokens[tr.PromptLen:]))
	if !strings.Contains(text, "</search>\n\n<information>") || strings.Contains(text, "JUNK") {
		t.Errorf("response %q: want the observation right after </search> and no text past the stop strings", text)
	}
}
