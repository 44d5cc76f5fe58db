package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const fixture = "../../model/tokenizer/testdata/qwen2"

func readGz[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestGoldenThroughCommand pipes golden strings through the command and
// compares with the ids @huggingface/transformers gave, then decodes them.
func TestGoldenThroughCommand(t *testing.T) {
	strs := readGz[string](t, "../../model/tokenizer/testdata/golden/strings.jsonl.gz")[:400]
	rows := readGz[struct {
		IDs  []int  `json:"ids"`
		Text string `json:"text"`
	}](t, "../../model/tokenizer/testdata/golden/qwen2.jsonl.gz")
	var in bytes.Buffer
	for i, s := range strs {
		line, _ := json.Marshal(map[string]any{"id": i, "text": s})
		in.Write(append(line, '\n'))
		line, _ = json.Marshal(map[string]any{"id": i, "ids": rows[i].IDs})
		in.Write(append(line, '\n'))
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-tokenizer", fixture}, &in, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<24)
	for n := 0; sc.Scan(); n++ {
		var resp struct {
			ID   int     `json:"id"`
			IDs  *[]int  `json:"ids"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		if n%2 == 0 && (resp.IDs == nil || !slices.Equal(*resp.IDs, rows[resp.ID].IDs)) {
			t.Errorf("text %q: ids %v, want %v", strs[resp.ID], resp.IDs, rows[resp.ID].IDs)
		}
		if n%2 == 1 && (resp.Text == nil || *resp.Text != rows[resp.ID].Text) {
			t.Errorf("ids %v: text %v, want %q", rows[resp.ID].IDs, resp.Text, rows[resp.ID].Text)
		}
	}
}

func TestChatAndBadLines(t *testing.T) {
	in := strings.NewReader(`{"messages": [{"role": "user", "content": "Q"}], "add_generation_prompt": true}
not json
{"ids": [999999]}
{"text": "a", "ids": [1]}
{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}]}
`)
	var out, errOut bytes.Buffer
	code := run([]string{"-tokenizer", fixture}, in, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 1 || len(lines) != 5 || !strings.Contains(errOut.String(), "3 lines failed") {
		t.Fatalf("exit %d, %d lines, stderr %q", code, len(lines), errOut.String())
	}
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
	var first struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Text != want || len(first.IDs) == 0 {
		t.Errorf("chat line: %s", lines[0])
	}
	for i, frag := range map[int]string{1: "line 2: invalid JSON", 2: "line 3: ids[0]: 999999", 3: "line 4: want exactly one"} {
		if !strings.Contains(lines[i], frag) {
			t.Errorf("line %d: %s, want %q", i+1, lines[i], frag)
		}
	}
	if !strings.Contains(lines[4], `{\"name\": \"f\", \"arguments\": {\"a\": 1}}`) {
		t.Errorf("tool call line: %s", lines[4])
	}
}

func TestTrainFlag(t *testing.T) {
	corpus := t.TempDir() + "/corpus.txt"
	os.WriteFile(corpus, []byte(strings.Repeat("hello world, hello tokenizer\n", 50)), 0o644)
	dir := t.TempDir() + "/tok"
	var errOut bytes.Buffer
	if code := run([]string{"-train", corpus, "-vocab", "300", "-save", dir}, nil, &bytes.Buffer{}, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var out bytes.Buffer
	if code := run([]string{"-tokenizer", dir}, strings.NewReader(`{"text": "hello world"}`), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var resp struct{ IDs []int }
	json.Unmarshal(out.Bytes(), &resp)
	// "hello" and " world" are frequent enough to become single tokens.
	if len(resp.IDs) != 2 {
		t.Errorf("hello world -> %v, want 2 tokens", resp.IDs)
	}
}

// TestChatTemplateKwargs renders through a Qwen3-style template with
// -chat-template-kwargs: enable_thinking=false adds the empty think block
// the Python reference shows; a bad JSON value is a usage error.
func TestChatTemplateKwargs(t *testing.T) {
	dir := t.TempDir()
	for src, dst := range map[string]string{
		fixture + "/tokenizer.json":                                "tokenizer.json",
		fixture + "/tokenizer_config.json":                         "tokenizer_config.json",
		"../../model/tokenizer/testdata/qwen3/chat_template.jinja": "chat_template.jinja",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := `{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}` + "\n"
	render := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"-tokenizer", dir}, args...), strings.NewReader(in), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		var r struct{ Text string }
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r.Text
	}
	plain := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got := render(); got != plain {
		t.Fatalf("no kwargs: %q", got)
	}
	if got := render("-chat-template-kwargs", `{"enable_thinking": false}`); got != plain+"<think>\n\n</think>\n\n" {
		t.Fatalf("enable_thinking=false: %q", got)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-tokenizer", dir, "-chat-template-kwargs", "enable_thinking=false"}, strings.NewReader(in), &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "not a JSON object") {
		t.Fatalf("bad kwargs: exit %d, %q", code, errOut.String())
	}
}

// thinkingDir is a tokenizer folder with the Qwen3 thinking template whose
// renders @huggingface/transformers made (model/tokenizer/testdata/qwen3/thinking).
func thinkingDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for src, dst := range map[string]string{
		fixture + "/tokenizer.json":        "tokenizer.json",
		fixture + "/tokenizer_config.json": "tokenizer_config.json",
		thinking + "/chat_template.jinja":  "chat_template.jinja",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const thinking = "../../model/tokenizer/testdata/qwen3/thinking"

// TestChatsAgainstTransformers pipes the 40 chats of the Qwen3 thinking
// fixture through the command, each as one record with its keyword
// arguments in chat_template_kwargs (as vLLM takes them per request), and
// compares with transformers.js: reasoning_content and enable_thinking of
// each record are rendered, with no -chat-template-kwargs flag.
func TestChatsAgainstTransformers(t *testing.T) {
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
	var in bytes.Buffer
	for i, c := range chats {
		rec := map[string]json.RawMessage{"id": json.RawMessage(strconv.Itoa(i)), "messages": c["messages"],
			"add_generation_prompt": c["add_generation_prompt"], "chat_template_kwargs": c["kwargs"]}
		if string(c["tools"]) != "null" {
			rec["tools"] = c["tools"]
		}
		line, _ := json.Marshal(rec)
		in.Write(append(line, '\n'))
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-tokenizer", thinkingDir(t)}, &in, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) || len(want) != 40 {
		t.Fatalf("%d lines for %d chats", len(lines), len(want))
	}
	for _, l := range lines {
		var r struct {
			ID   int    `json:"id"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Text != want[r.ID].Text {
			t.Errorf("%s:\n got %q\nwant %q", want[r.ID].Name, r.Text, want[r.ID].Text)
		}
	}
}

// TestRecordKwargsOverFlag: a record's chat_template_kwargs win over
// -chat-template-kwargs key by key; a bad one fails its line alone.
func TestRecordKwargsOverFlag(t *testing.T) {
	in := strings.NewReader(`{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}
{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true, "chat_template_kwargs": {"enable_thinking": true}}
{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true, "chat_template_kwargs": {"other": 1}}
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": "enable_thinking=false"}
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"add_generation_prompt": true}}
`)
	var out, errOut bytes.Buffer
	code := run([]string{"-tokenizer", thinkingDir(t), "-chat-template-kwargs", `{"enable_thinking": false}`}, in, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 1 || len(lines) != 5 || !strings.Contains(errOut.String(), "2 lines failed") {
		t.Fatalf("exit %d, %d lines, stderr %q", code, len(lines), errOut.String())
	}
	plain := `<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n`
	empty := plain + `<think>\n\n</think>\n\n`
	for i, want := range []string{`"text":"` + empty + `"`, `"text":"` + plain + `"`, `"text":"` + empty + `"`,
		`line 4: chat_template_kwargs: `, `line 5: chat_template_kwargs: `} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %s", i+1, lines[i], want)
		}
	}
}
