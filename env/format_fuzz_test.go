package env

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

// FuzzToolCallParser: any model text is parsed without panicking, every
// call is classified consistently, and Step answers with an observation
// that keeps the markup intact.
func FuzzToolCallParser(f *testing.F) {
	seeds := []string{
		call(`{"name": "lookup", "arguments": {"key": "a"}}`),
		call(`{"name": "lookup", "arguments": {"key": "a"}`),
		call(`{"name": "lookup"}`),
		call(`{"arguments": {}}`),
		call(`[1,2]`),
		call(`"name"`),
		call(`{"name": "lookup", "arguments": {"key": "huge", "n": 3000}}`),
		"<tool_call><tool_call></tool_call></tool_call>",
		"<tool_call>\xff\xfe</tool_call>",
		"no call at all",
		"<tool_call>{\"name\": \"lookup\", \"arguments\": {\"key\": \"\u2028\"}}</tool_call><|im_end|>",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	m := QwenMarkup()
	e, err := New(DefaultConfig(), lookupTool{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, turn string) {
		if strings.Contains(turn, `"panic"`) || strings.Contains(turn, `"slow"`) {
			return // those keys test other paths
		}
		calls := m.ParseToolCalls(turn)
		if len(calls) > strings.Count(turn, "</tool_call>") {
			t.Fatalf("%d calls from %d end tags", len(calls), strings.Count(turn, "</tool_call>"))
		}
		for _, c := range calls {
			switch c.Err {
			case ErrNone:
				if c.Arguments == nil || !json.Valid(c.Arguments) {
					t.Fatalf("well-formed call without arguments: %+v", c)
				}
			case ErrJSON:
				if json.Valid([]byte(c.Raw)) {
					t.Fatalf("valid JSON classified as bad: %q", c.Raw)
				}
			case ErrNoName, ErrNoArguments, ErrUnknownTool:
			default:
				t.Fatalf("parser produced kind %q", c.Err)
			}
		}
		ep := e.NewEpisode()
		ep.Reset(data.Sample{Question: "q"})
		r := ep.Step(context.Background(), turn)
		if len(calls) == 0 {
			if !r.Done || r.Observation != "" {
				t.Fatalf("no call but %+v", r)
			}
			return
		}
		if !strings.HasSuffix(r.Observation, "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n") ||
			!strings.Contains(r.Observation, "<|im_start|>user\n<tool_response>\n") {
			t.Fatalf("observation lost its markup: %q", r.Observation)
		}
		if len(r.Info.Calls) != 1 {
			t.Fatalf("%d calls executed", len(r.Info.Calls))
		}
	})
}
