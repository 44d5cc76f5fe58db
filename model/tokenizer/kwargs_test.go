package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTemplateKwargsQwen3 renders a Qwen3-style template with and without
// enable_thinking and compares with Python jinja2 (testdata/qwen3/render.py):
// enable_thinking=false must add an empty think block after the
// generation prompt, and only there.
func TestTemplateKwargsQwen3(t *testing.T) {
	var ref struct {
		Messages []Message `json:"messages"`
		Cases    []struct {
			Kwargs json.RawMessage `json:"kwargs"`
			Gen    bool            `json:"add_generation_prompt"`
			Text   string          `json:"text"`
		} `json:"cases"`
	}
	readJSON(t, "testdata/qwen3/rendered.json", &ref)
	tok := loadFixture(t, "qwen2")
	tok.templates = chatTemplates{text: string(mustRead(t, "testdata/qwen3/chat_template.jinja")), source: "qwen3 chat_template.jinja"}
	empty := 0
	for _, c := range ref.Cases {
		k, err := ParseTemplateKwargs(string(c.Kwargs))
		if err != nil {
			t.Fatal(err)
		}
		tok.SetTemplateKwargs(k)
		got, err := tok.Render(ref.Messages, nil, c.Gen)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.Text {
			t.Errorf("kwargs %s, generation prompt %v:\n got %q\nwant %q", c.Kwargs, c.Gen, got, c.Text)
		}
		if strings.HasSuffix(got, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
			empty++
		}
		// The same through a Chat's own Vars, which win over the defaults.
		tok.SetTemplateKwargs(TemplateKwargs{})
		got2, err := tok.RenderChat(Chat{Messages: ref.Messages, AddGenerationPrompt: c.Gen, Vars: k.Vars()})
		if err != nil || got2 != c.Text {
			t.Errorf("kwargs %s through Chat.Vars: %q, %v", c.Kwargs, got2, err)
		}
	}
	if empty != 1 {
		t.Fatalf("%d renders end in an empty think block, want 1 (enable_thinking=false with the generation prompt)", empty)
	}
}

func TestParseTemplateKwargs(t *testing.T) {
	k, err := ParseTemplateKwargs(` {"enable_thinking": false, "custom": [1, "a"]} `)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Keys(), ","); got != "custom,enable_thinking" {
		t.Fatalf("keys %s", got)
	}
	if k.Vars()["enable_thinking"] != false {
		t.Fatalf("enable_thinking = %#v", k.Vars()["enable_thinking"])
	}
	if b, _ := k.MarshalText(); string(b) != `{"enable_thinking":false,"custom":[1,"a"]}` {
		t.Fatalf("MarshalText %s", b)
	}
	var back TemplateKwargs
	if err := back.UnmarshalText([]byte(k.String())); err != nil || back.Vars()["enable_thinking"] != false {
		t.Fatalf("round trip: %v", err)
	}
	for _, s := range []string{"", "{}", "null"} {
		if k, err := ParseTemplateKwargs(s); err != nil || k.Vars() != nil {
			t.Fatalf("%q: %v, %v", s, k.Vars(), err)
		}
	}
	for s, want := range map[string]string{
		"enable_thinking=false":         "not a JSON object",
		"[1]":                           "not a JSON object",
		`{"messages": []}`:              `"messages" is set by the render itself`,
		`{"add_generation_prompt": 1}`:  `"add_generation_prompt" is set by the render itself`,
		`{"enable_thinking": false} {}`: "not a JSON object",
	} {
		if _, err := ParseTemplateKwargs(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", s, err, want)
		}
	}
}

// FuzzParseTemplateKwargs: any input is accepted or refused without a
// panic, and what is accepted survives MarshalText and a second parse.
func FuzzParseTemplateKwargs(f *testing.F) {
	for _, s := range []string{`{"enable_thinking": false}`, `{}`, ``, `{"a": [1, {"b": null}], "c": "x"}`, `{"tools": 1}`, `[`, `{"a": 1e999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseTemplateKwargs(s)
		if err != nil {
			return
		}
		b, _ := k.MarshalText()
		k2, err := ParseTemplateKwargs(string(b))
		if err != nil || strings.Join(k2.Keys(), ",") != strings.Join(k.Keys(), ",") {
			t.Fatalf("%q -> %s -> %v, %v", s, b, k2.Keys(), err)
		}
	})
}

// thinkingChat is one input of testdata/qwen3/thinking/chats.json.
type thinkingChat struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              json.RawMessage   `json:"kwargs"`
}

// TestQwen3Thinking renders 40 chats with a Qwen3 template that shows an
// assistant turn's reasoning (testdata/qwen3/thinking) and compares byte
// for byte with @huggingface/transformers' apply_chat_template
// (render.mjs): reasoning_content reaches the template as transformers
// passes it, an absent or null one leaves the template to split the
// content at </think>, and enable_thinking comes per chat.
func TestQwen3Thinking(t *testing.T) {
	var chats []thinkingChat
	var want []struct {
		Name  string  `json:"name"`
		Text  *string `json:"text"`
		Error string  `json:"error"`
	}
	readJSON(t, "testdata/qwen3/thinking/chats.json", &chats)
	readJSON(t, "testdata/qwen3/thinking/rendered.json", &want)
	if len(chats) != 40 || len(want) != len(chats) {
		t.Fatalf("%d chats, %d renders", len(chats), len(want))
	}
	tok := loadFixture(t, "qwen2")
	tok.templates = chatTemplates{text: string(mustRead(t, "testdata/qwen3/thinking/chat_template.jinja")), source: "qwen3 thinking chat_template.jinja"}
	reasoned := 0
	for i, c := range chats {
		if want[i].Name != c.Name || want[i].Text == nil {
			t.Fatalf("render %d: %q %q", i, want[i].Name, want[i].Error)
		}
		k, err := ParseTemplateKwargs(string(c.Kwargs))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		got, err := tok.RenderChat(Chat{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Vars: k.Vars()})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got != *want[i].Text {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, *want[i].Text)
		}
		for _, m := range c.Messages {
			if m.ReasoningContent != nil && *m.ReasoningContent != "" && strings.Contains(got, "<think>\n"+strings.Trim(*m.ReasoningContent, "\n")+"\n</think>") {
				reasoned++
				break
			}
		}
	}
	// The fixture must exercise what it is for: chats whose rendered
	// reasoning comes from reasoning_content alone.
	if reasoned < 10 {
		t.Errorf("%d chats render a reasoning_content, want at least 10", reasoned)
	}
}

// TestReasoningContentJSON: reasoning_content survives a JSON round trip
// and stays absent when absent, so a template can tell the two apart.
func TestReasoningContentJSON(t *testing.T) {
	var ms []Message
	if err := json.Unmarshal([]byte(`[{"role": "assistant", "content": "A", "reasoning_content": "R"}, {"role": "assistant", "content": "B", "reasoning_content": null}, {"role": "assistant", "content": "C", "reasoning_content": ""}]`), &ms); err != nil {
		t.Fatal(err)
	}
	if ms[0].ReasoningContent == nil || *ms[0].ReasoningContent != "R" || ms[1].ReasoningContent != nil || ms[2].ReasoningContent == nil {
		t.Fatalf("%+v", ms)
	}
	b, _ := json.Marshal(ms)
	if want := `[{"role":"assistant","content":"A","reasoning_content":"R"},{"role":"assistant","content":"B"},{"role":"assistant","content":"C","reasoning_content":""}]`; string(b) != want {
		t.Fatalf("%s\nwant %s", b, want)
	}
}
