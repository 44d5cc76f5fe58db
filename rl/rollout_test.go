package rl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// scriptedPolicy is a mock language model: every slot replays the turns of
// the script chosen by its prompt, one token per decode step, and moves to
// the next turn after each observation. Its logits put all mass on the
// scripted token, so sampling at any temperature returns it.
type scriptedPolicy struct {
	vocab, slots, maxLen int
	scripts              map[string][][]int32 // prompt marker → turns
	tok                  *tokenizer.Tokenizer
	onToken              func(marker string, id int32)

	mu       sync.Mutex
	state    []slotState
	prefills int
	rewrites int // contexts refilled after a rewrite
}

type slotState struct {
	marker    string
	n         int // tokens held
	turn, pos int
	// prev is the state before the last Reset: a step-mode rollout resets
	// a slot to refill it with a rewritten context, which goes on with the
	// next turn of the same script.
	prev *slotState
}

func (p *scriptedPolicy) Vocab() int  { return p.vocab }
func (p *scriptedPolicy) Slots() int  { return p.slots }
func (p *scriptedPolicy) MaxLen() int { return p.maxLen }
func (p *scriptedPolicy) Reset(slot int) {
	old := p.state[slot]
	old.prev = nil
	p.state[slot] = slotState{prev: &old}
}
func (p *scriptedPolicy) Fork(dst, src int) { p.state[dst] = p.state[src] }

func (p *scriptedPolicy) Feed(chunks []model.Chunk) ([]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]float32, len(chunks)*p.vocab)
	for j, c := range chunks {
		st := &p.state[c.Slot]
		switch {
		case st.n == 0: // a prompt
			text := p.tok.Decode(toInts(c.Tokens))
			if st.prev != nil && st.prev.marker != "" && strings.Contains(text, "<tool_response>") {
				st.marker, st.turn = st.prev.marker, st.prev.turn+1 // a rewritten context
				p.rewrites++
				break
			}
			p.prefills++
			for m := range p.scripts {
				if strings.Contains(text, m) {
					st.marker = m
				}
			}
		case len(c.Tokens) > 1: // the last sampled token and an observation
			st.turn, st.pos = st.turn+1, 0
		}
		st.n += len(c.Tokens)
		if st.n > p.maxLen {
			panic("scripted policy: slot overflow")
		}
		turns := p.scripts[st.marker]
		id := int32(0)
		if st.turn < len(turns) && st.pos < len(turns[st.turn]) {
			id = turns[st.turn][st.pos]
		}
		st.pos++
		out[j*p.vocab+int(id)] = 1e4
		if p.onToken != nil {
			p.onToken(st.marker, id)
		}
	}
	return out, nil
}

// echoTool returns its query; blockOn, when set for a query, waits for it.
type echoTool struct{ blockOn map[string]chan struct{} }

func (echoTool) Name() string        { return "search" }
func (echoTool) Description() string { return "echo the query" }
func (echoTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}`)
}
func (e echoTool) Call(ctx context.Context, args json.RawMessage) (env.Result, error) {
	var a struct{ Query string }
	json.Unmarshal(args, &a)
	if ch := e.blockOn[a.Query]; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return env.Result{}, ctx.Err()
		}
	}
	return env.Result{Content: "result for " + a.Query, Success: true}, nil
}

type rolloutFixture struct {
	tok  *tokenizer.Tokenizer
	stop []int32
}

func newRolloutFixture(t *testing.T) rolloutFixture {
	t.Helper()
	corpus := []string{"<think>find the capital</think> search query answer result for alpha beta gamma delta",
		`{"name": "search", "arguments": {"query": "alpha"}}`, "Question: what is alpha? beta gamma"}
	tok, err := tokenizer.Train(corpus, 400, tokenizer.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stop []int32
	for _, s := range []string{"</tool_call>", "<|im_end|>"} {
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no id for %s", s)
		}
		stop = append(stop, int32(id))
	}
	return rolloutFixture{tok: tok, stop: stop}
}

func (f rolloutFixture) enc(s string) []int32 { return toInt32(f.tok.Encode(s)) }

const (
	callAlpha = "<think>find alpha</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"alpha\"}}\n</tool_call>"
	callBeta  = "<think>find beta</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"beta\"}}\n</tool_call>"
	answer    = "<think>done</think>\n<answer>gamma</answer><|im_end|>"
)

func (f rolloutFixture) rollout(t *testing.T, cfg RolloutConfig, envCfg env.Config, p Policy, tool env.Tool) *Rollout {
	t.Helper()
	e, err := env.New(envCfg, tool)
	if err != nil {
		t.Fatal(err)
	}
	return &Rollout{Cfg: &cfg, Policy: p, Tok: f.tok, Env: e, Stop: f.stop}
}

func testRolloutConfig() RolloutConfig {
	c := DefaultRolloutConfig()
	c.N, c.MaxTurnTokens, c.MaxResponseTokens, c.MaxPromptTokens, c.ToolConcurrency = 1, 200, 2000, 2000, 4
	return c
}

// TestRolloutDeterministicQueues runs more groups than the slots hold with
// deterministic batching: every group must still be admitted and finish.
func TestRolloutDeterministicQueues(t *testing.T) {
	f := newRolloutFixture(t)
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 2, maxLen: 4096, tok: f.tok, state: make([]slotState, 2),
		scripts: map[string][][]int32{"alpha": {f.enc(callAlpha), f.enc(answer)}}}
	cfg := testRolloutConfig()
	cfg.N, cfg.Deterministic = 2, true
	var samples []data.Sample
	for i := 0; i < 5; i++ {
		samples = append(samples, data.Sample{ID: fmt.Sprint(i), Question: "what is alpha?", Answers: []string{"gamma"}})
	}
	trajs, err := f.rollout(t, cfg, env.DefaultConfig(), p, echoTool{}).Run(context.Background(), 0, samples)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		if tr.Finish != FinishAnswer || tr.Turns != 2 || tr.Group != i/2 {
			t.Fatalf("trajectory %d: finish %s turns %d group %d", i, tr.Finish, tr.Turns, tr.Group)
		}
	}
	if p.prefills != 5 {
		t.Fatalf("%d prefills for 5 prompts", p.prefills)
	}
}

// TestRolloutMasksAndRewardPlacement checks a two-call trajectory token by
// token: prompt, model turns (mask 1), observations (mask 0), where the
// tool-call ends are, and the finish reason.
func TestRolloutMasksAndRewardPlacement(t *testing.T) {
	f := newRolloutFixture(t)
	turns := [][]int32{f.enc(callAlpha), f.enc(callBeta), f.enc(answer)}
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 4, maxLen: 4096, tok: f.tok,
		scripts: map[string][][]int32{"alpha": turns}, state: make([]slotState, 4)}
	cfg := testRolloutConfig()
	cfg.N = 3
	r := f.rollout(t, cfg, env.DefaultConfig(), p, echoTool{})
	sample := data.Sample{ID: "s1", Question: "what is alpha?", Answers: []string{"gamma"}}
	trajs, err := r.Run(context.Background(), 0, []data.Sample{sample})
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 3 || p.prefills != 1 {
		t.Fatalf("%d trajectories from %d prefills, want 3 from 1 (shared prefill)", len(trajs), p.prefills)
	}
	// Build the expected sequence independently: the prompt as the chat
	// template renders it, then turn, observation, turn, observation, turn.
	ep := r.Env.Episode()
	msgs, tools := ep.Reset(sample)
	prompt, err := r.encodePrompt(msgs, tools)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(prompt)
	wantAct := make([]bool, len(prompt))
	var wantEnds []int
	for i, turn := range turns {
		want = append(want, turn...)
		for range turn {
			wantAct = append(wantAct, true)
		}
		if i < 2 {
			wantEnds = append(wantEnds, len(want)-1)
			res := ep.Step(context.Background(), f.tok.Decode(toInts(turn)))
			obs := f.enc(res.Observation)
			if !strings.Contains(res.Observation, "<tool_response>\nresult for ") {
				t.Fatalf("observation %q", res.Observation)
			}
			want = append(want, obs...)
			wantAct = append(wantAct, make([]bool, len(obs))...)
		}
	}
	for i, tr := range trajs {
		if !slices.Equal(tr.Tokens, want) {
			t.Fatalf("trajectory %d tokens differ:\n got %v\nwant %v", i, tr.Tokens, want)
		}
		if !slices.Equal(tr.Action, wantAct) {
			t.Fatalf("trajectory %d action mask differs", i)
		}
		if !slices.Equal(tr.ToolCallEnds, wantEnds) || tr.Tokens[wantEnds[0]] != f.stop[0] {
			t.Fatalf("tool-call ends %v, want %v (each on </tool_call>)", tr.ToolCallEnds, wantEnds)
		}
		if tr.PromptLen != len(prompt) || tr.Turns != 3 || tr.ToolCalls != 2 || tr.Finish != FinishAnswer || tr.Group != 0 {
			t.Fatalf("trajectory %d: prompt %d turns %d calls %d finish %s group %d", i, tr.PromptLen, tr.Turns, tr.ToolCalls, tr.Finish, tr.Group)
		}
		if !strings.HasSuffix(f.tok.Decode(toInts(tr.Tokens)), "<answer>gamma</answer><|im_end|>") || tr.Outcome.Metrics["em"] != 1 || tr.Outcome.Reward != 1 {
			t.Fatalf("outcome %+v", tr.Outcome)
		}
		for k, a := range tr.Action {
			if !a && tr.LogProb[k] != 0 {
				t.Fatalf("environment token %d has a sampling logprob", k)
			}
		}
	}
}

// TestRolloutLimits checks each limit ends the trajectory exactly where it
// should.
func TestRolloutLimits(t *testing.T) {
	f := newRolloutFixture(t)
	long := f.enc(strings.Repeat("alpha beta ", 40))
	mk := func(turns ...[]int32) *scriptedPolicy {
		return &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 2, maxLen: 4096, tok: f.tok,
			scripts: map[string][][]int32{"alpha": turns}, state: make([]slotState, 2)}
	}
	sample := []data.Sample{{ID: "s", Question: "what is alpha?", Answers: []string{"gamma"}}}

	// A turn cut at max_turn_tokens without a tool call ends the episode.
	cfg := testRolloutConfig()
	cfg.MaxTurnTokens = 17
	tr, err := f.rollout(t, cfg, env.DefaultConfig(), mk(long), echoTool{}).Run(context.Background(), 0, sample)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr[0].ResponseLen(); got != 17 || tr[0].Finish != FinishTurnLimit || tr[0].Turns != 1 {
		t.Fatalf("turn limit: response %d finish %s turns %d, want 17 turn_limit 1", got, tr[0].Finish, tr[0].Turns)
	}

	// The response limit cuts the trajectory mid-turn.
	cfg = testRolloutConfig()
	call := f.enc(callAlpha)
	cfg.MaxResponseTokens = len(call) + 5
	tr, err = f.rollout(t, cfg, env.DefaultConfig(), mk(call, long), echoTool{}).Run(context.Background(), 0, sample)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr[0].ResponseLen(); got != cfg.MaxResponseTokens || tr[0].Finish != FinishLength {
		t.Fatalf("response limit: response %d finish %s, want %d length", got, tr[0].Finish, cfg.MaxResponseTokens)
	}

	// The environment's max turns: the last observation is kept, then stop.
	envCfg := env.DefaultConfig()
	envCfg.MaxTurns = 1
	tr, err = f.rollout(t, testRolloutConfig(), envCfg, mk(call, f.enc(answer)), echoTool{}).Run(context.Background(), 0, sample)
	if err != nil {
		t.Fatal(err)
	}
	last := tr[0].Tokens[len(tr[0].Tokens)-1]
	if tr[0].Finish != FinishMaxTurns || tr[0].Turns != 1 || tr[0].Action[len(tr[0].Action)-1] || last == f.stop[0] {
		t.Fatalf("max turns: finish %s turns %d, last token action=%v", tr[0].Finish, tr[0].Turns, tr[0].Action[len(tr[0].Action)-1])
	}

	// A prompt longer than max_prompt_tokens is an error naming the sample.
	cfg = testRolloutConfig()
	cfg.MaxPromptTokens = 10
	if _, err := f.rollout(t, cfg, env.DefaultConfig(), mk(call), echoTool{}).Run(context.Background(), 0, sample); err == nil || !strings.Contains(err.Error(), "sample s") {
		t.Fatalf("long prompt: %v", err)
	}
}

// TestRolloutContinuousBatching blocks sample A's tool until sample B has
// produced its final answer: a rollout that waited for every tool call of a
// round before decoding again would never finish.
func TestRolloutContinuousBatching(t *testing.T) {
	f := newRolloutFixture(t)
	release := make(chan struct{})
	var once sync.Once
	ans := f.enc(answer)
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 2, maxLen: 4096, tok: f.tok, state: make([]slotState, 2),
		scripts: map[string][][]int32{
			"alpha": {f.enc(callAlpha), ans},
			"beta":  {f.enc(callBeta), f.enc(callBeta), ans},
		}}
	seenBetaTurns := 0
	p.onToken = func(marker string, id int32) {
		if marker == "beta" && id == ans[len(ans)-1] {
			seenBetaTurns++
			once.Do(func() { close(release) })
		}
	}
	r := f.rollout(t, testRolloutConfig(), env.DefaultConfig(), p, echoTool{blockOn: map[string]chan struct{}{"alpha": release}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	trajs, err := r.Run(ctx, 0, []data.Sample{
		{ID: "a", Question: "what is alpha?", Answers: []string{"gamma"}},
		{ID: "b", Question: "what is beta?", Answers: []string{"gamma"}},
	})
	if err != nil {
		t.Fatalf("rollout did not finish while a tool was slow: %v", err)
	}
	if trajs[0].Turns != 2 || trajs[1].Turns != 3 || trajs[0].Finish != FinishAnswer || trajs[1].Finish != FinishAnswer {
		t.Fatalf("turns %d and %d, finishes %s and %s", trajs[0].Turns, trajs[1].Turns, trajs[0].Finish, trajs[1].Finish)
	}
}
