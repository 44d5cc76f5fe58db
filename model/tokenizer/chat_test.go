package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
)

type conversation struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
}

type rendering struct {
	Text  *string `json:"text"`
	Error string  `json:"error"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestChatTemplates renders every conversation with each fixture's own
// template and with the built-in one, and compares byte for byte with
// Python jinja2 configured as transformers configures it
// (testdata/chat/render.py).
func TestChatTemplates(t *testing.T) {
	var convs []conversation
	var want map[string][]rendering
	readJSON(t, "testdata/chat/conversations.json", &convs)
	readJSON(t, "testdata/chat/rendered.json", &want)
	builtin, err := Parse(mustRead(t, "testdata/qwen2/tokenizer.json"), "qwen2")
	if err != nil {
		t.Fatal(err)
	}
	if err := builtin.applyConfig(mustRead(t, "testdata/qwen2/tokenizer_config.json"), "qwen2 config"); err != nil {
		t.Fatal(err)
	}
	if _, source := builtin.ChatTemplate(); source != "built-in Qwen2.5" {
		t.Fatalf("template source %q", source)
	}
	constructs := loadFixture(t, "qwen2")
	constructs.templates = chatTemplates{text: string(mustRead(t, "testdata/chat/constructs.jinja")), source: "constructs.jinja"}
	cases := map[string]*Tokenizer{"qwen2": loadFixture(t, "qwen2"), "llama3": loadFixture(t, "llama3"), "builtin": builtin, "constructs": constructs}
	for name, tok := range cases {
		ref := want[name]
		if name == "builtin" {
			ref = want["qwen2"]
		}
		if len(ref) != len(convs) {
			t.Fatalf("%s: %d renderings for %d conversations", name, len(ref), len(convs))
		}
		for i, c := range convs {
			got, err := tok.Render(c.Messages, c.Tools, c.AddGenerationPrompt)
			switch {
			case ref[i].Text == nil:
				if err == nil || !strings.Contains(err.Error(), ref[i].Error) || !strings.HasPrefix(err.Error(), "tokenizer: chat template") {
					t.Errorf("%s/%s: error %v, want one containing %q", name, c.Name, err, ref[i].Error)
				}
			case err != nil:
				t.Errorf("%s/%s: %v", name, c.Name, err)
			case got != *ref[i].Text:
				t.Errorf("%s/%s:\n got %q\nwant %q", name, c.Name, got, *ref[i].Text)
			}
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestQwenLayout renders the conversation of formats.md §2.5 and compares
// with the layout written out there (⏎ = newline), typed in by hand.
func TestQwenLayout(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	search := `{"type": "function", "function": {"name": "search", "description": "Search.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}`
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: "Q"},
		{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "search", Arguments: json.RawMessage(`{"query":"q"}`)}}}},
		{Role: "tool", Content: "R"},
		{Role: "assistant", Content: "A"},
	}
	got, err := tok.Render(msgs, []json.RawMessage{json.RawMessage(search)}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll("<|im_start|>system⏎S⏎⏎# Tools⏎⏎You may call one or more functions to assist with the user query.⏎⏎You are provided with function signatures within <tools></tools> XML tags:⏎<tools>⏎"+
		search+
		"⏎</tools>⏎⏎For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:⏎<tool_call>⏎{\"name\": <function-name>, \"arguments\": <args-json-object>}⏎</tool_call><|im_end|>⏎"+
		"<|im_start|>user⏎Q<|im_end|>⏎"+
		"<|im_start|>assistant⏎<tool_call>⏎{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}⏎</tool_call><|im_end|>⏎"+
		"<|im_start|>user⏎<tool_response>⏎R⏎</tool_response><|im_end|>⏎"+
		"<|im_start|>assistant⏎A<|im_end|>⏎", "⏎", "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Without tools or a system message the default system block appears,
	// and the generation prompt closes the text.
	got, err = tok.Render([]Message{{Role: "user", Content: "Q"}}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ids, err := tok.EncodeChat([]Message{{Role: "user", Content: "Q"}}, nil, true)
	if err != nil || tok.Decode(ids) != want {
		t.Errorf("EncodeChat: %v %q", err, tok.Decode(ids))
	}
}

func TestTemplateErrors(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	for text, want := range map[string]string{
		"{% if messages %}unclosed":                 "chat template",
		"{{ raise_exception('no tools allowed') }}": "raise_exception: no tools allowed",
		"{{ messages[0].content | nosuchfilter }}":  "nosuchfilter",
	} {
		tok.templates = chatTemplates{text: text, source: "test.jinja"}
		_, err := tok.Render([]Message{{Role: "user", Content: "x"}}, nil, false)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "test.jinja") {
			t.Errorf("template %q: error %v, want it to contain %q and the source", text, err, want)
		}
	}
	tok = loadFixture(t, "qwen2")
	bad := []Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`{"a":`)}}}}}
	if _, err := tok.Render(bad, nil, false); err == nil || !strings.Contains(err.Error(), "messages[0]: tool_calls[0].function.arguments") {
		t.Errorf("broken arguments: %v", err)
	}
	if _, err := tok.RenderChat(Chat{Template: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown named template: %v", err)
	}
}

// TestPyJSON checks the Python json.dumps formatting of numbers and
// strings against values printed by CPython (repr and json.dumps).
func TestPyJSON(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.5: "0.5", 1e-7: "1e-07", 1e20: "1e+20", 1e16: "1e+16", 1e15: "1000000000000000.0",
		0.0001: "0.0001", 0.00001: "1e-05", -2.5: "-2.5", 123456789.125: "123456789.125", 1.0 / 3: "0.3333333333333333",
	} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %s, want %s", f, got, want)
		}
	}
	v, err := jsonValue([]byte(`{"b": "tab\tquote\"back\\slash\u0001<&>é\u2028", "a": [1, -0.0, true, null, {}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out := filterPyJSON(nil, execValue(v), emptyArgs())
	// json.dumps({"b": "tab\tquote\"back\\slash\x01<&>é\u2028", "a": [1, -0.0, True, None, {}]}, ensure_ascii=False)
	want := "{\"b\": \"tab\\tquote\\\"back\\\\slash\\u0001<&>é\u2028\", \"a\": [1, -0.0, true, null, {}]}"
	if out.String() != want {
		t.Errorf("tojson = %s\nwant   %s", out.String(), want)
	}
}

// TestRolloutSeams pins down the facts the package doc states about
// building a conversation turn by turn.
func TestRolloutSeams(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	user := []Message{{Role: "user", Content: "Q"}}
	prompt, err := tok.Render(user, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// The default system block is there without a system message.
	if !strings.HasPrefix(prompt, "<|im_start|>system\nYou are Qwen") {
		t.Errorf("prompt %q lacks the default system block", prompt)
	}
	// A plain answer: prompt ids + sampled ids + "<|im_end|>" + forced "\n"
	// gives the same ids as encoding the whole rendered conversation.
	full, err := tok.Render(append(user, Message{Role: "assistant", Content: "A b c."}), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := tok.EOS()
	var turns []int
	turns = append(turns, tok.Encode(prompt)...)
	turns = append(turns, tok.Encode("A b c.")...)
	turns = append(turns, imEnd)
	turns = append(turns, tok.Encode("\n")...)
	if !slices.Equal(turns, tok.Encode(full)) {
		t.Errorf("turn by turn %v\nwhole       %v", turns, tok.Encode(full))
	}
	// A sampled leading "\n" after the prompt's "\n" is one piece when the
	// whole text is encoded, two when the turns are encoded apart.
	apart := append(tok.Encode(prompt), tok.Encode("\nA")...)
	whole := tok.Encode(prompt + "\nA")
	if slices.Equal(apart, whole) {
		t.Errorf("expected a seam difference, both are %v", whole)
	}
	if tok.Decode(apart) != tok.Decode(whole) {
		t.Error("the two encodings must spell the same text")
	}
	// Tool calls are re-serialized: the model's own spacing is not kept.
	sampled := "<tool_call>\n{\"name\":\"search\",\"arguments\":{\"query\":\"q\"}}\n</tool_call>"
	rendered, err := tok.Render(append(user, Message{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "search", Arguments: json.RawMessage(`{"query":"q"}`)}}}}), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rendered, sampled) || !strings.Contains(rendered, `{"name": "search", "arguments": {"query": "q"}}`) {
		t.Errorf("rendered tool call: %q", rendered)
	}
}

func execValue(v any) *exec.Value { return exec.AsValue(v) }
func emptyArgs() *exec.VarArgs    { return exec.NewVarArgs() }

// TestToJSONArguments checks tojson's keyword arguments against CPython:
//
//	v = {'b': 'é😀\u2028<', 'a': [1, {'x': None}]}
//	json.dumps(v, ensure_ascii=True); json.dumps(v, ensure_ascii=False, separators=(',', ':'))
//	json.dumps(v, ensure_ascii=False, indent=2); json.dumps(v, ensure_ascii=False, sort_keys=True)
func TestToJSONArguments(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	v, err := jsonValue([]byte(`{"b": "é😀\u2028<", "a": [1, {"x": null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for tpl, want := range map[string]string{
		"{{ v | tojson(ensure_ascii=true) }}":     "{\"b\": \"\\u00e9\\ud83d\\ude00\\u2028<\", \"a\": [1, {\"x\": null}]}",
		"{{ v | tojson(separators=(',', ':')) }}": "{\"b\":\"é😀\u2028<\",\"a\":[1,{\"x\":null}]}",
		"{{ v | tojson(indent=2) }}":              "{\n  \"b\": \"é😀\u2028<\",\n  \"a\": [\n    1,\n    {\n      \"x\": null\n    }\n  ]\n}",
		"{{ v | tojson(sort_keys=true) }}":        "{\"a\": [1, {\"x\": null}], \"b\": \"é😀\u2028<\"}",
		"{{ v | tojson(indent=none) }}":           "{\"b\": \"é😀\u2028<\", \"a\": [1, {\"x\": null}]}",
		"{{ v | tojson(default=1) }}":             "ERROR unsupported argument default",
		"{{ v | tojson(separators=(',',)) }}":     "ERROR separators must be a pair",
		"{{ v | tojson(indent='  ') }}":           "ERROR indent must be an integer",
	} {
		tok.templates = chatTemplates{text: tpl, source: "t"}
		got, err := tok.RenderChat(Chat{Vars: map[string]any{"v": v}})
		if wantErr, isErr := strings.CutPrefix(want, "ERROR "); isErr {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: error %v, want %q", tpl, err, wantErr)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", tpl, got, err, want)
		}
	}
}
