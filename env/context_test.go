package env

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

// history is P=[1 2], three exchanges R_k=[10k], O_k=[10k+1 10k+2],
// E_k=[10k+9].
func history() *History {
	h := &History{Prompt: []int32{1, 2}}
	for k := int32(1); k <= 3; k++ {
		h.Turns = append(h.Turns, Exchange{Response: []int32{10 * k}, Observation: []int32{10*k + 1, 10*k + 2}, Elided: []int32{10*k + 9}})
	}
	return h
}

func TestContextBuild(t *testing.T) {
	for _, c := range []struct {
		cfg  ContextConfig
		want []int32
	}{
		{ContextConfig{ContextFull, 1}, []int32{1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}},
		{ContextConfig{ContextWindow, 1}, []int32{1, 2, 30, 31, 32}},
		{ContextConfig{ContextWindow, 2}, []int32{1, 2, 20, 21, 22, 30, 31, 32}},
		{ContextConfig{ContextWindow, 5}, []int32{1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}},
		{ContextConfig{ContextDropObservations, 1}, []int32{1, 2, 10, 19, 20, 29, 30, 31, 32}},
		{ContextConfig{ContextDropObservations, 2}, []int32{1, 2, 10, 19, 20, 21, 22, 30, 31, 32}},
	} {
		if got := c.cfg.Build(history()); !slices.Equal(got, c.want) {
			t.Errorf("%s K=%d: %v, want %v", c.cfg.Policy, c.cfg.Turns, got, c.want)
		}
	}
	// Under full each context extends the last one; under window it stops
	// doing so once the history outgrows K.
	h := history()
	full, win := ContextConfig{ContextFull, 1}, ContextConfig{ContextWindow, 1}
	h2 := &History{Prompt: h.Prompt, Turns: h.Turns[:2]}
	if !Extends(full.Build(h), full.Build(h2)) {
		t.Error("full: the context after three turns does not extend the one after two")
	}
	if Extends(win.Build(h), win.Build(h2)) {
		t.Error("window 1: the context after three turns extends the one after two")
	}
}

func TestContextValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  ContextConfig
		want string
	}{
		{ContextConfig{"last", 2}, "context \"last\""},
		{ContextConfig{ContextWindow, 0}, "context_turns 0"},
		{ContextConfig{ContextFull, -1}, "context_turns -1"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
	d := DefaultContextConfig()
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	cfg := DefaultConfig()
	cfg.Context.Policy = "summary"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("env.Config.Validate with context summary: %v", err)
	}
}

// The QA env's elided observation keeps the markup of the real one and
// replaces only the tool result.
func TestElidedObservation(t *testing.T) {
	e, err := New(DefaultConfig(), lookupTool{})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(data.Sample{Question: "q"})
	res := ep.Step(context.Background(), `<tool_call>{"name": "lookup", "arguments": {"key": "k"}}</tool_call>`)
	if !strings.Contains(res.Observation, "value of k") {
		t.Fatalf("observation %q lacks the tool result", res.Observation)
	}
	want := strings.Replace(res.Observation, "value of k", ElidedMarker, 1)
	if res.Elided != want {
		t.Errorf("elided %q, want %q", res.Elided, want)
	}
}

// TestTruncatedResponsesCounted: a tool response cut at
// max_tool_response_length is marked in the text and counted in the step's
// info; one within it is not.
func TestTruncatedResponsesCounted(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxResponseChars = 50
	e, err := New(cfg, lookupTool{})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(data.Sample{Question: "q"})
	res := ep.Step(context.Background(), `<tool_call>{"name": "lookup", "arguments": {"key": "huge", "n": 80}}</tool_call>`)
	if res.Info.Truncated != 1 || !strings.Contains(res.Observation, "...") {
		t.Errorf("a response of 80 characters at a limit of 50: truncated %d, observation %q", res.Info.Truncated, res.Observation)
	}
	res = ep.Step(context.Background(), `<tool_call>{"name": "lookup", "arguments": {"key": "k"}}</tool_call>`)
	if res.Info.Truncated != 0 {
		t.Errorf("a short response counted as truncated (%d)", res.Info.Truncated)
	}
}

// TestSearchR1Context: Search-R1's episodes take the context policy too,
// and elide a search's passages inside the <information> tags.
func TestSearchR1Context(t *testing.T) {
	_, samples, ix := searchR1Fixture(t)
	cfg := SearchR1Config()
	cfg.Context = ContextConfig{Policy: ContextDropObservations, Turns: 1}
	e, err := NewSearchR1(ix, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(samples[0])
	res := ep.Step(context.Background(), "<search> anything </search>")
	if res.Elided != "\n\n<information>"+ElidedMarker+"</information>\n\n" || res.Observation == res.Elided {
		t.Errorf("elided %q for observation %q", res.Elided, res.Observation)
	}
	var c Contexter = ep
	h := history()
	if got, want := c.Context(h), cfg.Context.Build(h); !slices.Equal(got, want) {
		t.Errorf("the episode's context %v, its policy's %v", got, want)
	}
}
