package data

import (
	"reflect"
	"testing"
)

func TestTrajectoryTurns(t *testing.T) {
	tr := &Trajectory{
		Steps: []Step{
			{Thought: "I need the founder of Tazomir.", Query: "founder of Tazomir"},
			{Thought: "The founder of Tazomir is Belovan. Now I need the birthplace of Belovan.", Query: "birthplace of Belovan"},
		},
		FinalThought: "The birthplace of Belovan is Kerunda. So the answer is Kerunda.",
		Answer:       "Kerunda",
	}
	// The Hermes/Qwen form, written out by hand.
	want := []string{
		"<think>I need the founder of Tazomir.</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"founder of Tazomir\"}}\n</tool_call>",
		"<think>The founder of Tazomir is Belovan. Now I need the birthplace of Belovan.</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"birthplace of Belovan\"}}\n</tool_call>",
		"<think>The birthplace of Belovan is Kerunda. So the answer is Kerunda.</think>\n<answer>Kerunda</answer>",
	}
	if got := tr.Turns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Turns:\n%q\nwant\n%q", got, want)
	}
	if got := tr.Render("<think>\n")[1]; got != "<think>\nThe founder of Tazomir is Belovan. Now I need the birthplace of Belovan.</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"birthplace of Belovan\"}}\n</tool_call>" {
		t.Fatalf("Render with a pre-fill: %q", got)
	}
}

func TestToolCallJSONMatchesPython(t *testing.T) {
	// Expected strings printed by Python 3.11:
	// json.dumps({"name": "search", "arguments": {"query": q}}, ensure_ascii=False)
	for q, want := range map[string]string{
		"capital of Velmora":   `{"name": "search", "arguments": {"query": "capital of Velmora"}}`,
		`say "hi" <b> & a\b`:   `{"name": "search", "arguments": {"query": "say \"hi\" <b> & a\\b"}}`,
		"a\b\f\u2028<é\x01\t/": `{"name": "search", "arguments": {"query": "a\b\f` + "\u2028" + `<é\u0001\t/"}}`,
	} {
		if got := ToolCallJSON("search", "query", q); got != want {
			t.Errorf("ToolCallJSON(%q) = %s, want %s", q, got, want)
		}
	}
}
