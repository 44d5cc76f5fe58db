package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

// warmstart is the tiny Qwen2 policy warm-started on gold search
// trajectories that cmd/train's tests use: it calls the search tool.
const warmstart = "../../cmd/train/testdata/warmstart"

const searchTool = `{"type": "function", "function": {"name": "search", "description": "Search for information on the internet using Wikipedia as a knowledge source.", "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "Search query"}}, "required": ["query"]}}}`

// question is a test question of the synthetic world the policy was
// warm-started on, as the search environment poses it.
const question = "Question: Who is the founder of the employer of Disonrar?\nSearch for every fact you need, then answer in <answer></answer>."

var (
	loadOnce sync.Once
	testM    *model.Model
	testTok  *tokenizer.Tokenizer
	loadErr  error
)

func load(t testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	loadOnce.Do(func() {
		if testM, loadErr = model.Load(warmstart, model.NewCPU(), model.LMHeadOutput); loadErr == nil {
			testTok, loadErr = tokenizer.Load(warmstart)
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return testM, testTok
}

// newServer serves the warm-start policy on a loopback test server.
func newServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	m, tok := load(t)
	eng := rl.NewEngine(rl.NewModelPolicy(m, 8, 1280), 0)
	s, err := New(cfg, eng, tok)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); eng.Close() })
	return s, ts
}

func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func chatBody(extra map[string]any) map[string]any {
	b := map[string]any{
		"model":    "r1go",
		"messages": []map[string]any{{"role": "user", "content": question}},
		"tools":    []json.RawMessage{json.RawMessage(searchTool)},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func completion(t testing.TB, url string, body map[string]any) ChatCompletion {
	t.Helper()
	st, raw := post(t, url+"/v1/chat/completions", body)
	if st != 200 {
		t.Fatalf("status %d: %s", st, raw)
	}
	var c ChatCompletion
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestToolCallGreedy: the warm-started policy answers the question with a
// search call, returned as an OpenAI tool call with an id and JSON
// arguments; usage counts the rendered prompt and the sampled tokens.
func TestToolCallGreedy(t *testing.T) {
	_, ts := newServer(t, DefaultConfig())
	c := completion(t, ts.URL, chatBody(map[string]any{"temperature": 0, "max_tokens": 64}))
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got finish %q message %+v", ch.FinishReason, ch.Message)
	}
	tc := ch.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "search" {
		t.Fatalf("tool call %+v", tc)
	}
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args.Query == "" {
		t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
	}
	_, tok := load(t)
	ids, err := tok.EncodeChat([]tokenizer.Message{{Role: "user", Content: question}}, []json.RawMessage{json.RawMessage(searchTool)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens < 5 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Fatalf("usage %+v, prompt of %d tokens", c.Usage, len(ids))
	}
	t.Logf("content %q, call %s(%s)", deref(ch.Message.Content), tc.Function.Name, tc.Function.Arguments)

	// The whole turn, fed back as an assistant message with a tool reply,
	// renders as a conversation the server continues.
	msgs := []map[string]any{{"role": "user", "content": question},
		{"role": "assistant", "content": ch.Message.Content, "tool_calls": ch.Message.ToolCalls},
		{"role": "tool", "tool_call_id": tc.ID, "content": "Halvorsen Bridge was built by Norvik Steel, founded by Ada Lund."}}
	c2 := completion(t, ts.URL, map[string]any{"messages": msgs, "tools": []json.RawMessage{json.RawMessage(searchTool)}, "temperature": 0, "max_tokens": 64})
	if c2.Usage.PromptTokens <= c.Usage.TotalTokens {
		t.Fatalf("second turn prompt %d tokens, not longer than the first turn's %d", c2.Usage.PromptTokens, c.Usage.TotalTokens)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// streamed reads an SSE response into its chunks; it fails on anything
// that is not "data: " lines separated by blank lines ending in [DONE].
func streamed(t testing.TB, url string, body map[string]any) []ChatChunk {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var chunks []ChatChunk
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || done {
			t.Fatalf("unexpected line %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", c.Object)
		}
		chunks = append(chunks, c)
	}
	if !done {
		t.Fatal("the stream did not end with [DONE]")
	}
	return chunks
}

// assembled is a streamed choice joined back together.
type assembled struct {
	content string
	calls   []ToolCall
	finish  string
	tokens  []TokenLogprob
}

func assemble(t testing.TB, chunks []ChatChunk) (map[int]*assembled, *Usage) {
	out := map[int]*assembled{}
	var usage *Usage
	for _, c := range chunks {
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			a := out[ch.Index]
			if a == nil {
				a = &assembled{}
				out[ch.Index] = a
			}
			if a.finish != "" {
				t.Fatalf("choice %d has a chunk after its finish reason", ch.Index)
			}
			if ch.Delta.Content != nil {
				a.content += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != len(a.calls) {
					t.Fatalf("tool call delta index %v, want %d", tc.Index, len(a.calls))
				}
				a.calls = append(a.calls, tc)
			}
			if ch.Logprobs != nil {
				a.tokens = append(a.tokens, ch.Logprobs.Content...)
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
	return out, usage
}

// TestStreamMatchesNonStreamed: with the same seed, the deltas of a
// streamed response join into the non-streamed message, choice by choice,
// with the same finish reasons, log-probabilities and usage.
func TestStreamMatchesNonStreamed(t *testing.T) {
	_, ts := newServer(t, DefaultConfig())
	for _, tc := range []map[string]any{
		{"seed": 7, "temperature": 1, "max_tokens": 48, "n": 3, "logprobs": true, "top_logprobs": 2},
		{"seed": 11, "temperature": 0.8, "top_p": 0.9, "max_tokens": 40, "stop": []string{"</think>"}},
		{"seed": 3, "temperature": 0, "max_tokens": 64, "tool_choice": "none"},
		{"seed": 5, "temperature": 1.2, "max_tokens": 30, "tools": nil},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			body := chatBody(tc)
			if v, ok := tc["tools"]; ok && v == nil {
				delete(body, "tools")
			}
			want := completion(t, ts.URL, body)
			body["stream"] = true
			body["stream_options"] = map[string]any{"include_usage": true}
			got, usage := assemble(t, streamed(t, ts.URL, body))
			if len(got) != len(want.Choices) {
				t.Fatalf("%d streamed choices, %d non-streamed", len(got), len(want.Choices))
			}
			for _, w := range want.Choices {
				g := got[w.Index]
				if g.content != deref(w.Message.Content) && !(w.Message.Content == nil && g.content == "") {
					t.Errorf("choice %d: streamed content %q, non-streamed %q", w.Index, g.content, deref(w.Message.Content))
				}
				if g.finish != w.FinishReason {
					t.Errorf("choice %d: finish %q vs %q", w.Index, g.finish, w.FinishReason)
				}
				if len(g.calls) != len(w.Message.ToolCalls) {
					t.Fatalf("choice %d: %d streamed tool calls, %d non-streamed", w.Index, len(g.calls), len(w.Message.ToolCalls))
				}
				for k := range g.calls {
					if g.calls[k].Function != w.Message.ToolCalls[k].Function {
						t.Errorf("call %d: %+v vs %+v", k, g.calls[k].Function, w.Message.ToolCalls[k].Function)
					}
				}
				if w.Logprobs != nil {
					if len(g.tokens) != len(w.Logprobs.Content) {
						t.Fatalf("choice %d: %d streamed logprobs, %d non-streamed", w.Index, len(g.tokens), len(w.Logprobs.Content))
					}
					for k := range g.tokens {
						// Choices decoded in different batch mixes round
						// differently in the last float32 digits.
						if g.tokens[k].Token != w.Logprobs.Content[k].Token || math.Abs(g.tokens[k].Logprob-w.Logprobs.Content[k].Logprob) > 1e-4 {
							t.Fatalf("token %d: %+v vs %+v", k, g.tokens[k], w.Logprobs.Content[k])
						}
					}
				}
			}
			if usage == nil || *usage != *want.Usage {
				t.Errorf("streamed usage %+v, non-streamed %+v", usage, want.Usage)
			}
		})
	}
}

// TestLogprobs: each token's top alternatives come most likely first, the
// greedy token is the first of them, and their probabilities sum to at
// most 1; the stop sequence cuts the content.
func TestLogprobs(t *testing.T) {
	_, ts := newServer(t, DefaultConfig())
	c := completion(t, ts.URL, chatBody(map[string]any{"temperature": 0, "max_tokens": 20, "logprobs": true, "top_logprobs": 5, "tool_choice": "none"}))
	lp := c.Choices[0].Logprobs
	if lp == nil || len(lp.Content) == 0 {
		t.Fatal("no logprobs")
	}
	for i, tk := range lp.Content {
		if len(tk.TopLogprobs) != 5 {
			t.Fatalf("token %d: %d alternatives", i, len(tk.TopLogprobs))
		}
		var mass float64
		for k, a := range tk.TopLogprobs {
			if k > 0 && a.Logprob > tk.TopLogprobs[k-1].Logprob {
				t.Fatalf("token %d: alternatives out of order", i)
			}
			mass += math.Exp(a.Logprob)
		}
		if tk.TopLogprobs[0].Token != tk.Token || tk.TopLogprobs[0].Logprob != tk.Logprob || tk.Logprob > 0 || mass > 1+1e-5 {
			t.Fatalf("token %d: %+v", i, tk)
		}
		if string(intsToBytes(tk.Bytes)) != tk.Token {
			t.Fatalf("token %d: bytes %v are not %q", i, tk.Bytes, tk.Token)
		}
	}
	full := deref(c.Choices[0].Message.Content)
	if len(full) < 4 {
		t.Fatalf("content %q too short to cut", full)
	}
	stop := full[2:4]
	c2 := completion(t, ts.URL, chatBody(map[string]any{"temperature": 0, "max_tokens": 20, "stop": stop, "tool_choice": "none"}))
	if got := deref(c2.Choices[0].Message.Content); got != full[:strings.Index(full, stop)] || c2.Choices[0].FinishReason != "stop" {
		t.Fatalf("stop %q: content %q finish %q, from %q", stop, got, c2.Choices[0].FinishReason, full)
	}
}

func intsToBytes(b []int) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = byte(v)
	}
	return out
}

// TestToolChoiceForced: tool_choice required or named opens the answer
// with the call markup, so the answer is a call (of the named tool): a
// parsed tool call, or, when the tiny model botches the JSON, content that
// starts with the forced markup.
func TestToolChoiceForced(t *testing.T) {
	_, ts := newServer(t, DefaultConfig())
	parsed := 0
	for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "search"}}} {
		for seed := 1; seed <= 4; seed++ {
			c := completion(t, ts.URL, chatBody(map[string]any{"seed": seed, "max_tokens": 64, "temperature": 0.7, "tool_choice": choice}))
			ch := c.Choices[0]
			if len(ch.Message.ToolCalls) > 0 {
				if ch.Message.ToolCalls[0].Function.Name != "search" || ch.FinishReason != "tool_calls" {
					t.Fatalf("%v seed %d: %+v", choice, seed, ch)
				}
				parsed++
				continue
			}
			want := "<tool_call>\n"
			if _, named := choice.(map[string]any); named {
				want += `{"name": "search", "arguments": `
			}
			if !strings.HasPrefix(deref(ch.Message.Content), want) {
				t.Fatalf("%v seed %d: content %q does not open with the forced call", choice, seed, deref(ch.Message.Content))
			}
		}
	}
	t.Logf("%d of 8 forced answers parsed as tool calls", parsed)
}

// TestErrors: malformed requests get OpenAI's error envelope, a 4xx status
// and the parameter at fault; the server keeps serving.
func TestErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 4096
	_, ts := newServer(t, cfg)
	big := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		body   any
		status int
		param  string
	}{
		{`{"messages": [`, 400, ""},
		{`{"messages": []}`, 400, "messages"},
		{`{"messages": [{"role": "wizard", "content": "hi"}]}`, 400, "messages[0].role"},
		{`{"messages": [{"role": "user", "content": 5}]}`, 400, "messages[0].content"},
		{`{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content[0].type"},
		{`{"messages": [{"role": "tool", "content": "x"}]}`, 400, "messages[0].tool_call_id"},
		{`{"messages": [{"role": "user", "content": "hi"}], "temperature": 3}`, 400, "temperature"},
		{`{"messages": [{"role": "user", "content": "hi"}], "top_p": 0}`, 400, "top_p"},
		{`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}`, 400, "max_tokens"},
		{`{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 100000}`, 400, "max_completion_tokens"},
		{`{"messages": [{"role": "user", "content": "hi"}], "n": 99}`, 400, "n"},
		{`{"messages": [{"role": "user", "content": "hi"}], "stop": ["a","b","c","d","e"]}`, 400, "stop"},
		{`{"messages": [{"role": "user", "content": "hi"}], "stop": 4}`, 400, "stop"},
		{`{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3}`, 400, "top_logprobs"},
		{`{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs"},
		{`{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}`, 400, "tool_choice"},
		{`{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "always"}`, 400, "tool_choice"},
		{`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]}`, 400, "tools[0].function.name"},
		{`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web"}]}`, 400, "tools[0].type"},
		{`{"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}`, 400, "stream_options"},
		{`{"messages": [{"role": "user", "content": "` + big + `"}]}`, 413, ""},
	} {
		st, raw := post(t, ts.URL+"/v1/chat/completions", tc.body)
		var e ErrorBody
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%v: body %s is not an error envelope (%v)", tc.body, raw, err)
			continue
		}
		if st != tc.status || deref(e.Error.Param) != tc.param && !(tc.param == "" && e.Error.Param == nil) {
			t.Errorf("%.80v: status %d param %q, want %d %q (%s)", tc.body, st, deref(e.Error.Param), tc.status, tc.param, e.Error.Message)
		}
	}
	// A prompt longer than the context is refused with OpenAI's code.
	long := strings.Repeat("Question: who? ", 200)
	cfg2 := DefaultConfig()
	_, ts2 := newServer(t, cfg2)
	st, raw := post(t, ts2.URL+"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": long}}})
	if st != 400 || !strings.Contains(string(raw), "context_length_exceeded") {
		t.Errorf("long prompt: %d %s", st, raw)
	}
	for _, path := range []string{"/v1/completions", "/v1/models/nope"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	// Still serving.
	completion(t, ts.URL, chatBody(map[string]any{"max_tokens": 4}))
}

// TestConcurrencyLimit: requests beyond max_concurrent are answered 429
// while the others complete.
func TestConcurrencyLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConcurrent = 2
	s, ts := newServer(t, cfg)
	s.sem <- struct{}{}
	s.sem <- struct{}{}
	st, raw := post(t, ts.URL+"/v1/chat/completions", chatBody(nil))
	if st != 429 || !strings.Contains(string(raw), "rate_limit_error") {
		t.Fatalf("%d %s", st, raw)
	}
	<-s.sem
	<-s.sem
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = post(t, ts.URL+"/v1/chat/completions", chatBody(map[string]any{"max_tokens": 8, "seed": i}))
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c != 200 && c != 429 {
			t.Fatalf("codes %v", codes)
		}
		if c == 200 {
			ok++
		}
	}
	if ok == 0 {
		t.Fatalf("codes %v", codes)
	}
}
