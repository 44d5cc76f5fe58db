package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// LookupTool is ReAct's lookup[term]: the next sentence containing term
// (case-insensitive) in the passages the episode's last search returned,
// over the same corpus as search. Each call with the same term moves on to
// the following match, as a reader's Ctrl-F does; a new search starts every
// term over. The answer is "(Result k / n) sentence", or "No more results."
// once the matches are used up. It keeps no state of its own: the passages
// and positions are the episode's Memory, so one LookupTool serves every
// episode.
type LookupTool struct{}

func (LookupTool) Name() string { return "lookup" }

func (LookupTool) Description() string {
	return "Find the next sentence containing a term in the passages of the last search."
}

func (LookupTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"term": {"type": "string", "description": "Word or phrase to find in the last search's passages"}}, "required": ["term"]}`)
}

// Call finds the next match. A blank term, or a lookup before any search in
// the episode, is an error the model sees.
func (LookupTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var a struct {
		Term string `json:"term"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Result{}, fmt.Errorf("lookup: arguments: %v", err)
	}
	term := strings.ToLower(strings.TrimSpace(a.Term))
	if term == "" {
		return Result{}, errors.New("lookup: empty term")
	}
	m := MemoryFrom(ctx)
	if m == nil {
		return Result{}, errors.New("lookup: called outside an episode")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.passages) == 0 {
		return Result{}, errors.New("lookup: no passage retrieved yet; search first")
	}
	var matches []string
	for _, p := range m.passages {
		for _, s := range Sentences(p) {
			if strings.Contains(strings.ToLower(s), term) {
				matches = append(matches, s)
			}
		}
	}
	if m.cursor == nil {
		m.cursor = map[string]int{}
	}
	k := m.cursor[term]
	if k >= len(matches) {
		return Result{Content: "No more results.", Success: true}, nil
	}
	m.cursor[term] = k + 1
	return Result{Content: fmt.Sprintf("(Result %d / %d) %s", k+1, len(matches), matches[k]), Success: true}, nil
}

// Sentences splits text after each '.', '!' or '?' that ends the text or is
// followed by white space, and at line breaks; pieces are trimmed and empty
// ones dropped.
func Sentences(text string) []string {
	var out []string
	rs := []rune(text)
	start := 0
	emit := func(end int) {
		if s := strings.TrimSpace(string(rs[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range rs {
		switch {
		case r == '\n':
			emit(i + 1)
		case r == '.' || r == '!' || r == '?':
			if i+1 == len(rs) || unicode.IsSpace(rs[i+1]) {
				emit(i + 1)
			}
		}
	}
	emit(len(rs))
	return out
}
