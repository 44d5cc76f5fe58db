package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
)

// shapes are the response fields the openai npm package declares
// (testdata/openai_shapes.json, made by testdata/make_openai_shapes.js).
type shapes struct {
	Source string                                                  `json:"source"`
	Types  map[string]map[string]struct{ Optional, Nullable bool } `json:"types"`
}

// conform checks a decoded JSON value against a declared type: every
// required field present, non-null unless nullable, no undeclared field.
func conform(t *testing.T, sh *shapes, typ string, v any, where string) {
	t.Helper()
	fields, ok := sh.Types[typ]
	if !ok {
		t.Fatalf("no type %s in the fixture", typ)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T is not an object (%s)", where, v, typ)
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := fields[n]
		val, present := obj[n]
		if !present && !f.Optional {
			t.Errorf("%s: required field %s.%s missing", where, typ, n)
		}
		if present && val == nil && !f.Nullable {
			t.Errorf("%s: %s.%s is null, which the type does not allow", where, typ, n)
		}
	}
	for n := range obj {
		if _, ok := fields[n]; !ok {
			t.Errorf("%s: field %q is not declared in %s", where, n, typ)
		}
	}
}

func eachObj(v any, f func(i int, o any)) {
	arr, _ := v.([]any)
	for i, o := range arr {
		f(i, o)
	}
}

// TestProtocolShapes checks responses against the official client's
// declared types: completions with tool calls and logprobs, chunks, usage
// and the model list.
func TestProtocolShapes(t *testing.T) {
	raw, err := os.ReadFile("testdata/openai_shapes.json")
	if err != nil {
		t.Fatal(err)
	}
	var sh shapes
	if err := json.Unmarshal(raw, &sh); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, DefaultConfig())
	_, body := post(t, ts.URL+"/v1/chat/completions", chatBody(map[string]any{"temperature": 0, "max_tokens": 64, "logprobs": true, "top_logprobs": 2}))
	var c map[string]any
	json.Unmarshal(body, &c)
	conform(t, &sh, "ChatCompletion", c, "completion")
	conform(t, &sh, "CompletionUsage", c["usage"], "usage")
	calls := 0
	eachObj(c["choices"], func(i int, ch any) {
		conform(t, &sh, "ChatCompletion.Choice", ch, "choice")
		m := ch.(map[string]any)
		conform(t, &sh, "ChatCompletionMessage", m["message"], "message")
		conform(t, &sh, "ChatCompletion.Choice.Logprobs", m["logprobs"], "logprobs")
		eachObj(m["logprobs"].(map[string]any)["content"], func(_ int, tk any) {
			conform(t, &sh, "ChatCompletionTokenLogprob", tk, "token")
			eachObj(tk.(map[string]any)["top_logprobs"], func(_ int, a any) { conform(t, &sh, "ChatCompletionTokenLogprob.TopLogprob", a, "top") })
		})
		eachObj(m["message"].(map[string]any)["tool_calls"], func(_ int, tc any) {
			calls++
			conform(t, &sh, "ChatCompletionMessageFunctionToolCall", tc, "tool call")
			conform(t, &sh, "ChatCompletionMessageFunctionToolCall.Function", tc.(map[string]any)["function"], "function")
		})
	})
	if calls == 0 {
		t.Fatal("the greedy answer has no tool call; the shape of tool calls went unchecked")
	}

	b := chatBody(map[string]any{"temperature": 0, "max_tokens": 64, "logprobs": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	rb, _ := json.Marshal(b)
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(rb))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	deltaCalls := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var k map[string]any
		json.Unmarshal([]byte(data), &k)
		conform(t, &sh, "ChatCompletionChunk", k, "chunk")
		if k["usage"] != nil {
			conform(t, &sh, "CompletionUsage", k["usage"], "chunk usage")
		}
		eachObj(k["choices"], func(_ int, ch any) {
			conform(t, &sh, "ChatCompletionChunk.Choice", ch, "chunk choice")
			m := ch.(map[string]any)
			conform(t, &sh, "ChatCompletionChunk.Choice.Delta", m["delta"], "delta")
			if m["logprobs"] != nil {
				conform(t, &sh, "ChatCompletionChunk.Choice.Logprobs", m["logprobs"], "chunk logprobs")
			}
			eachObj(m["delta"].(map[string]any)["tool_calls"], func(_ int, tc any) {
				deltaCalls++
				conform(t, &sh, "ChatCompletionChunk.Choice.Delta.ToolCall", tc, "delta tool call")
				conform(t, &sh, "ChatCompletionChunk.Choice.Delta.ToolCall.Function", tc.(map[string]any)["function"], "delta function")
			})
		})
	}
	resp.Body.Close()
	if deltaCalls == 0 {
		t.Fatal("no streamed tool call")
	}

	r, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
		Data   []any  `json:"data"`
	}
	json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	if list.Object != "list" || len(list.Data) != 1 {
		t.Fatalf("models %+v", list)
	}
	conform(t, &sh, "Model", list.Data[0], "model")
}
