package serve

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: any body either parses into a request within the limits or is
// refused with a 400 invalid_request_error; nothing panics.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"messages": [{"role": "user", "content": "hi"}]}`,
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}], "n": 2, "stop": "x"}`,
		`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"q\"}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "f"}}}`,
		`{"messages": [{"role": "user", "content": "hi"}], "temperature": 0.5, "top_p": 0.9, "max_tokens": 10, "seed": -3, "logprobs": true, "top_logprobs": 4, "stream": true, "stream_options": {"include_usage": true}}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{Cfg: DefaultConfig()}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := s.parse(body)
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != "invalid_request_error" || ae.Message == "" {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if len(p.msgs) == 0 || p.n < 1 || p.n > s.Cfg.MaxN || p.maxTokens < 1 || p.maxTokens > s.Cfg.MaxTokens ||
			p.top < 0 || p.top > 20 || len(p.stops) > 4 || p.sampling.Validate() != nil {
			t.Fatalf("accepted out-of-range request %+v", p)
		}
	})
}

// FuzzParseCalls: tool-call markup of any shape parses or is refused
// without a panic, and every call returned has a name and JSON arguments.
func FuzzParseCalls(f *testing.F) {
	f.Add(`<tool_call>
{"name": "search", "arguments": {"query": "q"}}
</tool_call>`)
	f.Add(`<tool_call>{"name": "a", "arguments": "{\"x\": 1}"}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>`)
	f.Add(`<tool_call>{"name": 5}</tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		calls, ok := parseCalls(text)
		if !ok {
			return
		}
		for _, c := range calls {
			if c.Function.Name == "" || !strings.HasPrefix(c.ID, "call_") || c.Type != "function" {
				t.Fatalf("call %+v from %q", c, text)
			}
		}
	})
}
