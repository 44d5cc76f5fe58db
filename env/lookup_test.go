package env

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

// TestLookupAfterSearch runs ReAct's lookup through an episode over a real
// BM25 index: search records its passages in the episode's memory, lookup
// walks the sentences that contain the term, and a new search starts over.
func TestLookupAfterSearch(t *testing.T) {
	corpus := `{"id": "0", "contents": "\"Lake Vostok\"\nLake Vostok is a lake in Antarctica. It lies under the ice. The lake was found by Russian scientists. Its water is old."}
{"id": "1", "contents": "\"Evan Morris\"\nEvan Morris was a lobbyist. He worked in Washington. Morris died in 2015."}
`
	ix := buildFromString(t, corpus, AnalyzerConfig{}, DefaultBM25)
	tools, err := NewTools([]string{"search", "lookup"}, ToolDeps{Retriever: ix, Search: SearchToolConfig{TopK: 1, Format: FormatSearchR1}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MaxTurns = 0 // no turn limit: this episode makes many calls
	e, err := New(cfg, tools...)
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(data.Sample{ID: "q", Question: "Where is Lake Vostok?"})
	ctx := context.Background()
	step := func(name, args string) string {
		t.Helper()
		r := ep.Step(ctx, call(`{"name": "`+name+`", "arguments": `+args+`}`))
		return r.Observation
	}
	if obs := step("lookup", `{"term": "lake"}`); !strings.Contains(obs, "no passage retrieved yet") {
		t.Errorf("lookup before search: %q", obs)
	}
	if obs := step("search", `{"query": "Lake Vostok Antarctica"}`); !strings.Contains(obs, "Lake Vostok is a lake in Antarctica") {
		t.Fatalf("search: %q", obs)
	}
	// The title line is the passage's first sentence; "LAKE" matches
	// "lake" in any case.
	for _, want := range []string{
		`(Result 1 / 3) "Lake Vostok"`,
		"(Result 2 / 3) Lake Vostok is a lake in Antarctica.",
		"(Result 3 / 3) The lake was found by Russian scientists.",
		"No more results.",
	} {
		if obs := step("lookup", `{"term": "LAKE"}`); !strings.Contains(obs, want) {
			t.Errorf("lookup lake: %q, want %q", obs, want)
		}
	}
	if obs := step("search", `{"query": "Evan Morris lobbyist"}`); !strings.Contains(obs, "Evan Morris") {
		t.Fatalf("second search: %q", obs)
	}
	if obs := step("lookup", `{"term": "morris"}`); !strings.Contains(obs, "(Result 1 / 3) \"Evan Morris\"") {
		t.Errorf("lookup after a new search: %q", obs)
	}
	// Another episode has its own memory.
	other := e.NewEpisode()
	other.Reset(data.Sample{ID: "q2", Question: "x"})
	if r := other.Step(ctx, call(`{"name": "lookup", "arguments": {"term": "morris"}}`)); !strings.Contains(r.Observation, "search first") {
		t.Errorf("a fresh episode saw another's passages: %q", r.Observation)
	}
}

func TestSentences(t *testing.T) {
	got := Sentences("\"Title\"\nOne. Two has 2.5 units! Three? e.g.x")
	want := []string{`"Title"`, "One.", "Two has 2.5 units!", "Three?", "e.g.x"}
	if !slices.Equal(got, want) {
		t.Errorf("Sentences = %q, want %q", got, want)
	}
}

func TestToolRegistry(t *testing.T) {
	if got := ToolNames(); !slices.Contains(got, "search") || !slices.Contains(got, "lookup") {
		t.Errorf("ToolNames = %v", got)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "no tools"},
		{[]string{"search", "calculator"}, `unknown tool "calculator" (registered: `},
		{[]string{"lookup", "lookup"}, `tool "lookup" named twice`},
	} {
		if err := CheckToolNames(tc.names); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckToolNames(%v) = %v, want %q", tc.names, err, tc.want)
		}
	}
	if _, err := NewTools([]string{"search"}, ToolDeps{}); err == nil || !strings.Contains(err.Error(), "nil retriever") {
		t.Errorf("search without a retriever: %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "twice for search") {
			t.Errorf("duplicate RegisterTool: recover() = %v", r)
		}
	}()
	RegisterTool("search", func(ToolDeps) (Tool, error) { return LookupTool{}, nil })
}
