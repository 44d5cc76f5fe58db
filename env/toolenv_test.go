package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
)

// lookupTool is a small in-test tool: it answers a key from a table, and
// misbehaves on request (error, panic, sleep, huge output).
type lookupTool struct{ reward *float64 }

func (lookupTool) Name() string        { return "lookup" }
func (lookupTool) Description() string { return "Look a key up." }
func (lookupTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"key": {"type": "string", "description": "the key"}, "n": {"type": "integer"}}, "required": ["key"]}`)
}
func (l lookupTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var a struct {
		Key string `json:"key"`
		N   int    `json:"n"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Result{}, err
	}
	switch a.Key {
	case "fail":
		return Result{}, errors.New("lookup: backend down")
	case "panic":
		panic("boom")
	case "slow":
		select {
		case <-time.After(5 * time.Second):
			return Result{Content: "late", Success: true}, nil
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	case "huge":
		a.N = min(max(a.N, 0), 1<<20)
		return Result{Content: strings.Repeat("é", a.N), Success: true}, nil
	}
	return Result{Content: "value of " + a.Key, Success: true, Reward: l.reward}, nil
}

func call(body string) string { return "<think>t</think>\n<tool_call>\n" + body + "\n</tool_call>" }

func newTestEnv(t *testing.T, mod func(*Config)) *Env {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg, lookupTool{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestResetMessagesAndSchemas(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.SystemPrompt = "S" })
	ep := e.NewEpisode()
	msgs, schemas := ep.Reset(data.Sample{Question: "Who?", Answers: []string{"x"}})
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Content != "Question: Who?\n"+AgentR1Instruction {
		t.Fatalf("messages %+v", msgs)
	}
	want := `{"type":"function","function":{"name":"lookup","description":"Look a key up.","parameters":{"type":"object","properties":{"key":{"type":"string","description":"the key"},"n":{"type":"integer"}},"required":["key"]}}}`
	if len(schemas) != 1 || string(schemas[0]) != want {
		t.Fatalf("schema %s", schemas[0])
	}
	prompt := []data.Message{{Role: "user", Content: "from parquet"}}
	msgs, _ = ep.Reset(data.Sample{Prompt: prompt})
	if len(msgs) != 1 || msgs[0].Content != "from parquet" {
		t.Fatalf("sample prompt not kept: %+v", msgs)
	}
}

func TestStepObservations(t *testing.T) {
	const head = "<|im_end|>\n<|im_start|>user\n<tool_response>\n"
	const tail = "\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n"
	tests := []struct {
		name    string
		turn    string
		content string
		kind    ErrorKind
		success bool
	}{
		{"ok", call(`{"name": "lookup", "arguments": {"key": "a"}}`), "value of a", ErrNone, true},
		{"bad json", call(`{"name": "lookup", "arguments": {"key": "a"}`), "Error: JSONDecodeError", ErrJSON, false},
		{"no name", call(`{"arguments": {"key": "a"}}`), "Error: No tool name", ErrNoName, false},
		{"name not string", call(`{"name": 3, "arguments": {}}`), "Error: ToolNotFoundError", ErrUnknownTool, false},
		{"name not string, no arguments", call(`{"name": ["lookup"]}`), "Error: No tool arguments", ErrNoArguments, false},
		{"array body", call(`["lookup"]`), "Error: No tool name", ErrNoName, false},
		{"no arguments", call(`{"name": "lookup"}`), "Error: No tool arguments", ErrNoArguments, false},
		{"unknown tool", call(`{"name": "calc", "arguments": {}}`), "Error: ToolNotFoundError", ErrUnknownTool, false},
		{"missing required", call(`{"name": "lookup", "arguments": {}}`), "Error: Invalid tool arguments", ErrInvalidArguments, false},
		{"wrong type", call(`{"name": "lookup", "arguments": {"key": 1}}`), "Error: Invalid tool arguments", ErrInvalidArguments, false},
		{"string arguments", call(`{"name": "lookup", "arguments": "{\"key\": \"a\"}"}`), "Error: Invalid tool arguments", ErrInvalidArguments, false},
		{"tool error", call(`{"name": "lookup", "arguments": {"key": "fail"}}`), "Error: lookup: backend down", ErrTool, false},
		{"tool panic", call(`{"name": "lookup", "arguments": {"key": "panic"}}`), "Error: env: tool panicked: boom", ErrPanic, false},
		{"first call only", call(`{"name": "lookup", "arguments": {"key": "a"}}`) + call(`{"name": "lookup", "arguments": {"key": "b"}}`), "value of a", ErrNone, true},
	}
	e := newTestEnv(t, nil)
	for _, tc := range tests {
		ep := e.NewEpisode()
		ep.Reset(data.Sample{Question: "q"})
		r := ep.Step(context.Background(), tc.turn)
		if r.Done {
			t.Errorf("%s: done after a tool call", tc.name)
		}
		if want := head + tc.content + tail; r.Observation != want {
			t.Errorf("%s: observation\n%q\nwant\n%q", tc.name, r.Observation, want)
		}
		if r.Info.ErrorKind != tc.kind || r.Info.Success != tc.success {
			t.Errorf("%s: kind %q success %v", tc.name, r.Info.ErrorKind, r.Info.Success)
		}
		if len(r.Messages) != 1 || r.Messages[0].Role != "user" || r.Messages[0].Content != "<tool_response>\n"+tc.content+"\n</tool_response>" {
			t.Errorf("%s: messages %+v", tc.name, r.Messages)
		}
	}
}

func TestStepEndsWithoutToolCall(t *testing.T) {
	ep := newTestEnv(t, nil).NewEpisode()
	ep.Reset(data.Sample{})
	r := ep.Step(context.Background(), "<think>x</think><answer>y</answer>")
	if !r.Done || r.Observation != "" || !ep.Done() {
		t.Fatalf("%+v", r)
	}
	// an unterminated call is no call
	ep.Reset(data.Sample{})
	if r := ep.Step(context.Background(), `<tool_call>{"name": "lookup", "arguments": {"key": "a"}}`); !r.Done {
		t.Fatal("unterminated call ran")
	}
	if r := ep.Step(context.Background(), call(`{"name": "lookup", "arguments": {"key": "a"}}`)); !r.Done || r.Observation != "" {
		t.Fatal("step after done did something")
	}
}

func TestStepMaxTurnsTimeoutTruncation(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.MaxTurns = 2
		c.CallTimeout = 20 * time.Millisecond
		c.MaxResponseChars = 10
	})
	ep := e.NewEpisode()
	ep.Reset(data.Sample{})
	r := ep.Step(context.Background(), call(`{"name": "lookup", "arguments": {"key": "slow"}}`))
	if r.Done || r.Info.ErrorKind != ErrTimeout || r.Info.Calls[0].Error != "tool lookup: context deadline exceeded" || !strings.Contains(r.Observation, "\nError: too...\n") {
		t.Fatalf("timeout: %+v", r)
	}
	r = ep.Step(context.Background(), call(`{"name": "lookup", "arguments": {"key": "huge", "n": 1000000}}`))
	if !r.Done || !r.Info.MaxTurns || !strings.Contains(r.Observation, "\n"+strings.Repeat("é", 10)+"...\n</tool_response>") {
		t.Fatalf("max turns / truncation: done=%v %q", r.Done, r.Observation)
	}
}

func TestStepVerlStyleParallel(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		*c = VerlConfig()
		c.MaxParallelCalls = 2
	})
	ep := e.NewEpisode()
	ep.Reset(data.Sample{})
	turn := call(`{"name": "lookup", "arguments": {"key": "a"}}`) + call(`{"name": "lookup", "arguments": {"key": "b"}}`) + call(`{"name": "lookup", "arguments": {"key": "c"}}`) + "<|im_end|>"
	r := ep.Step(context.Background(), turn)
	want := "\n<|im_start|>user\n<tool_response>\nvalue of a\n</tool_response>\n<tool_response>\nvalue of b\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	if r.Observation != want || r.Info.Ignored != 1 || len(r.Info.Calls) != 2 {
		t.Fatalf("%q ignored %d", r.Observation, r.Info.Ignored)
	}
	if len(r.Messages) != 2 || r.Messages[1].Role != "tool" || r.Messages[1].Content != "value of b" {
		t.Fatalf("messages %+v", r.Messages)
	}
}

func TestStepProcessReward(t *testing.T) {
	half := 0.5
	cfg := DefaultConfig()
	cfg.Process = ProcessConfig{Name: "call-validity", Valid: 0.1, Invalid: -0.1}
	e, err := New(cfg, lookupTool{reward: &half})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(data.Sample{})
	if r := ep.Step(context.Background(), call(`{"name": "lookup", "arguments": {"key": "a"}}`)); !near(r.Reward, 0.6) {
		t.Fatalf("reward %v want 0.6", r.Reward)
	}
	if r := ep.Step(context.Background(), call(`{"name": "nope", "arguments": {}}`)); !near(r.Reward, -0.1) {
		t.Fatalf("reward %v want -0.1", r.Reward)
	}
}

type schemaTool struct {
	lookupTool
	name, params string
}

func (s schemaTool) Name() string                { return s.name }
func (s schemaTool) Parameters() json.RawMessage { return json.RawMessage(s.params) }

func TestToolRegistrationRejectsBadSchemas(t *testing.T) {
	bad := []schemaTool{
		{name: "bad name!", params: `{"type":"object","properties":{},"required":[]}`},
		{name: "t", params: `{"type":"array","properties":{},"required":[]}`},
		{name: "t", params: `{"type":"object","required":[]}`},
		{name: "t", params: `{"type":"object","properties":{}}`},
		{name: "t", params: `{"type":"object","properties":{"a":{}},"required":["b"]}`},
		{name: "t", params: `{"type":"object","properties":{"a":3},"required":[]}`},
		{name: "t", params: `{"type":"object","properties":{"a":{"type":"strang"}},"required":[]}`},
		{name: "t", params: `not json`},
	}
	for _, b := range bad {
		if _, err := NewToolset(b); err == nil {
			t.Errorf("accepted %s %s", b.name, b.params)
		} else if !strings.HasPrefix(err.Error(), "env: tool") {
			t.Errorf("error %q does not name the tool", err)
		}
	}
	if _, err := NewToolset(lookupTool{}, lookupTool{}); err == nil {
		t.Error("duplicate tool accepted")
	}
	if _, err := New(Config{Style: "x"}); err == nil {
		t.Error("bad config accepted")
	}
}

func TestTruncateSides(t *testing.T) {
	s := "αβγδεζηθ" // 8 code points, 16 bytes
	for _, tc := range []struct {
		side TruncateSide
		want string
	}{
		{TruncateAgentR1, "αβγδ..."},
		{TruncateLeft, "αβγδ...(truncated)"},
		{TruncateRight, "(truncated)...εζηθ"},
		{TruncateMiddle, "αβ...(truncated)...ηθ"},
	} {
		if got := Truncate(s, 4, tc.side); got != tc.want {
			t.Errorf("%s: %q want %q", tc.side, got, tc.want)
		}
	}
	if Truncate(s, 8, TruncateAgentR1) != s || Truncate(s, 0, TruncateAgentR1) != s {
		t.Error("cut a string within the limit")
	}
}

func TestAssistantBlocks(t *testing.T) {
	m := QwenMarkup()
	text := "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>assistant\nB <|im_start|>assistant\nC<|im_end|><|im_start|>assistant\nD"
	got := m.AssistantBlocks(text)
	if len(got) != 2 || got[0] != "A" || got[1] != "B <|im_start|>assistant\nC" {
		t.Fatalf("%q", got)
	}
}

// TestConcurrentEpisodes runs many episodes of one Env at once over the
// real search tool: each must see only its own state.
func TestConcurrentEpisodes(t *testing.T) {
	ix, _ := buildFixture(t, AnalyzerConfig{})
	e, err := NewMultiHopQA(ix, DefaultConfig(), SearchToolConfig{TopK: 1, Format: FormatSearchR1})
	if err != nil {
		t.Fatal(err)
	}
	queries := []string{"Warsaw", "Genentech", "Lake Vostok", "Kraków"}
	errs := make(chan string, 64)
	done := make(chan struct{})
	for i := 0; i < 32; i++ {
		go func(i int) {
			defer func() { done <- struct{}{} }()
			ep := e.NewEpisode()
			q := queries[i%len(queries)]
			ep.Reset(data.Sample{Question: q, Answers: []string{q}})
			for turn := 1; turn <= 3; turn++ {
				r := ep.Step(context.Background(), call(`{"name": "search", "arguments": {"query": "`+q+`"}}`))
				if r.Info.Turn != turn || !r.Info.Success || !strings.Contains(r.Observation, "(Title: \""+q+"\")") {
					errs <- fmt.Sprintf("episode %d turn %d: %+v", i, turn, r.Info)
					return
				}
			}
			s := ep.Score("<|im_start|>assistant\n<think>x</think><answer>" + q + "</answer><|im_end|>")
			if s.EM != 1 {
				errs <- fmt.Sprintf("episode %d scored %+v", i, s)
			}
		}(i)
	}
	for i := 0; i < 32; i++ {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The evidence reward over the synthetic world's BM25 search at top-1: each
// gold search lands on its step's evidence and earns Useful once; the same
// search again and a search off the chain earn Useless; a call that fails
// earns nothing; the next episode starts with nothing found.
func TestStepEvidenceReward(t *testing.T) {
	w, _, ix := searchR1Fixture(t)
	train, err := w.Split("train")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Process = ProcessConfig{Name: "evidence", Useful: 0.25, Useless: -0.5}
	cfg.MaxTurns = 0
	scfg := DefaultSearchToolConfig()
	scfg.TopK = 1
	st, err := NewSearchTool(ix, scfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	search := func(q string) string {
		return call(`{"name": "search", "arguments": {"query": "` + q + `"}}`)
	}
	// smp is a 3-hop question; other's first search lands off its chain.
	var smp, other data.Sample
	for _, s := range train {
		if smp.Gold == nil && len(s.Gold.Steps) >= 3 {
			smp = s
		}
	}
	if !HasEvidence(smp) {
		t.Fatalf("no 3-hop training question with its evidence chain in %d", len(train))
	}
	onChain := func(id string) bool {
		for _, st := range smp.Gold.Steps {
			if st.Evidence == id {
				return true
			}
		}
		return false
	}
	for _, s := range train {
		if !onChain(s.Gold.Steps[0].Evidence) {
			other = s
			break
		}
	}
	episode := e.NewEpisode()
	// earns checks a step that ran one call and earned want.
	earns := func(round int, turn string, success bool, want float64) {
		t.Helper()
		r := episode.Step(context.Background(), turn)
		if r.Done || len(r.Info.Calls) != 1 || r.Info.Calls[0].Success != success || r.Reward != want {
			t.Fatalf("round %d: %q: reward %v, done %v, calls %+v", round, turn, r.Reward, r.Done, r.Info.Calls)
		}
	}
	for round := 0; round < 2; round++ {
		episode.Reset(smp)
		earns(round, search(other.Gold.Steps[0].Query), true, -0.5)
		earns(round, call(`{"name": "search", "arguments": {"query": "  "}}`), false, 0)
		for i, step := range smp.Gold.Steps {
			r := episode.Step(context.Background(), search(step.Query))
			if !near(r.Reward, 0.25) || len(r.Info.Calls[0].Passages) != 1 || r.Info.Calls[0].Passages[0] != step.Evidence {
				t.Fatalf("round %d step %d (%q): reward %v, passages %v, want 0.25 for %s", round, i, step.Query, r.Reward, r.Info.Calls[0].Passages, step.Evidence)
			}
		}
		earns(round, search(smp.Gold.Steps[0].Query), true, -0.5)
	}
	if HasEvidence(data.Sample{Question: "q"}) {
		t.Fatal("a sample without a gold chain has evidence")
	}
}
