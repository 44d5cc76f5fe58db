package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

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
