package serve

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

// thinking holds a Qwen3 template with thinking and transformers.js's
// renders of 40 chats with it (render.mjs).
const thinking = "../../model/tokenizer/testdata/qwen3/thinking"

// thinkingServer serves the warm-start policy with its tokenizer under the
// Qwen3 thinking template.
func thinkingServer(t *testing.T) (*tokenizer.Tokenizer, *httptest.Server) {
	t.Helper()
	m, _ := load(t)
	dir := t.TempDir()
	for src, dst := range map[string]string{
		warmstart + "/tokenizer.json":        "tokenizer.json",
		warmstart + "/tokenizer_config.json": "tokenizer_config.json",
		thinking + "/chat_template.jinja":    "chat_template.jinja",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	eng := rl.NewEngine(rl.NewModelPolicy(m, 8, 1280), 0)
	s, err := New(DefaultConfig(), eng, tok)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); eng.Close() })
	return tok, ts
}

// openAIMessages turns the fixture's transformers messages into the
// OpenAI API's: tool-call arguments as JSON text, the rest as it is
// (reasoning_content included, as vLLM accepts it).
func openAIMessages(t *testing.T, raw json.RawMessage) []map[string]any {
	var msgs []map[string]any
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			if _, isText := fn["arguments"].(string); !isText {
				b, _ := json.Marshal(fn["arguments"])
				fn["arguments"] = string(b)
			}
		}
	}
	return msgs
}

// TestChatTemplateKwargsAndReasoning: the chats of the thinking fixture
// that end in a generation prompt, sent as requests with their keyword
// arguments in chat_template_kwargs, are prompted with exactly the ids of
// transformers.js's render: an assistant message's reasoning_content and a
// request's enable_thinking reach the template.
func TestChatTemplateKwargsAndReasoning(t *testing.T) {
	tok, ts := thinkingServer(t)
	var chats []map[string]json.RawMessage
	var want []struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	for path, v := range map[string]any{thinking + "/chats.json": &chats, thinking + "/rendered.json": &want} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	sent, reasoned, kwargs := 0, 0, 0
	for i, c := range chats {
		if string(c["add_generation_prompt"]) != "true" || string(c["messages"]) == "[]" {
			continue // the API always adds the generation prompt, and needs a message
		}
		body := map[string]any{"messages": openAIMessages(t, c["messages"]), "max_tokens": 1, "temperature": 0, "return_token_ids": true}
		if string(c["tools"]) != "null" {
			body["tools"] = json.RawMessage(c["tools"])
		}
		if string(c["kwargs"]) != "null" {
			body["chat_template_kwargs"] = json.RawMessage(c["kwargs"])
			kwargs++
		}
		if strings.Contains(string(c["messages"]), `"reasoning_content"`) {
			reasoned++
		}
		st, raw := post(t, ts.URL+"/v1/chat/completions", body)
		var resp ChatCompletion
		if err := json.Unmarshal(raw, &resp); st != 200 || err != nil {
			t.Errorf("%s: %d %s", want[i].Name, st, raw)
			continue
		}
		sent++
		wantIDs := toInt32(tok.Encode(want[i].Text))
		if !slices.Equal(resp.PromptTokenIDs, wantIDs) {
			t.Errorf("%s: prompt\n %q\nwant\n %q", want[i].Name, tok.Decode(toInts(resp.PromptTokenIDs)), want[i].Text)
		}
	}
	if sent < 15 || reasoned < 4 || kwargs < 5 {
		t.Fatalf("%d chats sent, %d with reasoning_content, %d with kwargs: the fixture no longer covers the API", sent, reasoned, kwargs)
	}
}

// TestChatTemplateKwargsRefused: keyword arguments that are not an object
// or set a variable the render sets itself, and reasoning on a turn that
// is not the assistant's, are 400s naming the field.
func TestChatTemplateKwargsRefused(t *testing.T) {
	_, ts := thinkingServer(t)
	for _, tc := range []struct{ body, param string }{
		{`{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": "enable_thinking=false"}`, "chat_template_kwargs"},
		{`{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"messages": []}}`, "chat_template_kwargs"},
		{`{"messages": [{"role": "user", "content": "hi", "reasoning_content": "r"}]}`, "messages[0].reasoning_content"},
	} {
		st, raw := post(t, ts.URL+"/v1/chat/completions", tc.body)
		var e ErrorBody
		if err := json.Unmarshal(raw, &e); err != nil || st != 400 || deref(e.Error.Param) != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, st, raw, tc.param)
		}
	}
}
