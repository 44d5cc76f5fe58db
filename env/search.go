package env

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SearchFormat says how a search tool writes its hits for the model.
type SearchFormat string

const (
	// FormatAgentR1 is Agent-R1's wiki_search output, Python's json.dumps of
	// {"results": [{"content": contents, "title": title}, ...]}.
	FormatAgentR1 SearchFormat = "agent-r1"
	// FormatSearchR1 is Search-R1's (and verl's search tool's) passage list:
	// "Doc 1(Title: <first line of contents>) <rest>\n" per hit.
	FormatSearchR1 SearchFormat = "search-r1"
	// FormatVerl is verl's search tool: per query "Doc 1 (Title: <first
	// line>)\n<rest>" blocks separated by blank lines, queries joined by
	// "\n---\n", the whole as Python's json.dumps({"result": text}).
	FormatVerl SearchFormat = "verl"
)

// SearchToolConfig configures a SearchTool.
type SearchToolConfig struct {
	Name   string // "search"
	TopK   int    // hits per query: 5 in Agent-R1, 3 in Search-R1
	Format SearchFormat
	// QueryList selects verl's schema {"query_list": [string, ...]} instead
	// of Agent-R1's {"query": string}; each query's hits are formatted in
	// turn and separated by "\n---\n".
	QueryList bool
	// MaxQueries bounds query_list; 0 means 8.
	MaxQueries int
}

// DefaultSearchToolConfig is Agent-R1's wiki_search tool.
func DefaultSearchToolConfig() SearchToolConfig {
	return SearchToolConfig{Name: "search", TopK: 5, Format: FormatAgentR1}
}

// SearchTool is the retrieval tool: it sends the model's query to a
// Retriever (the local BM25 index or an HTTP retriever) and formats hits.
type SearchTool struct {
	r   Retriever
	cfg SearchToolConfig
}

// NewSearchTool checks the config and wraps a retriever.
func NewSearchTool(r Retriever, cfg SearchToolConfig) (*SearchTool, error) {
	if r == nil {
		return nil, errors.New("env: search tool: nil retriever")
	}
	if cfg.Name == "" {
		cfg.Name = "search"
	}
	if cfg.TopK <= 0 {
		return nil, fmt.Errorf("env: search tool: top-k %d must be positive", cfg.TopK)
	}
	if cfg.Format != FormatAgentR1 && cfg.Format != FormatSearchR1 && cfg.Format != FormatVerl {
		return nil, fmt.Errorf("env: search tool: unknown format %q", cfg.Format)
	}
	if cfg.MaxQueries <= 0 {
		cfg.MaxQueries = 8
	}
	return &SearchTool{r: r, cfg: cfg}, nil
}

func (s *SearchTool) Name() string { return s.cfg.Name }

func (s *SearchTool) Description() string {
	if s.cfg.QueryList {
		return "Search a Wikipedia corpus with one or more queries; returns the best passages for each query."
	}
	return "Search for information on the internet using Wikipedia as a knowledge source."
}

func (s *SearchTool) Parameters() json.RawMessage {
	if s.cfg.QueryList {
		return json.RawMessage(`{"type": "object", "properties": {"query_list": {"type": "array", "items": {"type": "string"}, "description": "Queries to search for, each a complete question or phrase."}}, "required": ["query_list"]}`)
	}
	return json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string", "description": "Search query"}}, "required": ["query"]}`)
}

// Call runs the search. A blank query or a failed retriever is an error
// (the env shows it to the model as "Error: ...").
func (s *SearchTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var a struct {
		Query     string   `json:"query"`
		QueryList []string `json:"query_list"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Result{}, fmt.Errorf("search: arguments: %v", err)
	}
	queries := []string{strings.TrimSpace(a.Query)}
	if s.cfg.QueryList {
		queries = queries[:0]
		for _, q := range a.QueryList {
			queries = append(queries, strings.TrimSpace(q))
		}
		if len(queries) == 0 {
			return Result{}, errors.New("search: empty query_list")
		}
		if len(queries) > s.cfg.MaxQueries {
			return Result{}, fmt.Errorf("search: %d queries, at most %d", len(queries), s.cfg.MaxQueries)
		}
	}
	for _, q := range queries {
		if blank(q) {
			return Result{}, fmt.Errorf("search: %w", errEmptyQuery)
		}
	}
	hits, err := s.r.Retrieve(ctx, queries, s.cfg.TopK)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	if len(hits) != len(queries) {
		return Result{}, fmt.Errorf("search: retriever answered %d of %d queries", len(hits), len(queries))
	}
	parts := make([]string, len(hits))
	var passages []string
	ids := []string{} // not nil: a search that found nothing still returned its passages
	for i, h := range hits {
		if len(h) > s.cfg.TopK {
			h = h[:s.cfg.TopK]
		}
		parts[i] = FormatHits(h, s.cfg.Format)
		for _, x := range h {
			passages = append(passages, x.Passage.Contents)
			ids = append(ids, x.Passage.ID)
		}
	}
	// The episode's lookup tool reads what this search found.
	if m := MemoryFrom(ctx); m != nil {
		m.SetPassages(passages)
	}
	content := strings.Join(parts, "\n---\n")
	if s.cfg.Format == FormatVerl {
		var b bytes.Buffer
		b.WriteString(`{"result": `)
		pyJSONString(&b, content)
		b.WriteString("}")
		content = b.String()
	}
	return Result{Content: content, Success: true, Passages: ids}, nil
}

// FormatHits writes one query's hits the way Agent-R1, Search-R1 or verl
// show them (verl's JSON wrapper is added by the tool, around all queries).
func FormatHits(hits []Hit, f SearchFormat) string {
	var b bytes.Buffer
	if f == FormatVerl {
		for i, h := range hits {
			title, text, _ := strings.Cut(h.Passage.Contents, "\n")
			b.WriteString("Doc " + strconv.Itoa(i+1) + " (Title: " + title + ")\n" + text + "\n\n")
		}
		return pyStrip(b.String())
	}
	if f == FormatSearchR1 {
		for i, h := range hits {
			title, text, _ := strings.Cut(h.Passage.Contents, "\n")
			b.WriteString("Doc " + strconv.Itoa(i+1) + "(Title: " + title + ") " + text + "\n")
		}
		return b.String()
	}
	b.WriteString(`{"results": [`)
	for i, h := range hits {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"content": `)
		pyJSONString(&b, h.Passage.Contents)
		b.WriteString(`, "title": `)
		pyJSONString(&b, h.Passage.Title)
		b.WriteString("}")
	}
	b.WriteString("]}")
	return b.String()
}

// NewMultiHopQA is the multi-hop QA environment of the Agent-R1 paper: one
// search tool over r, the Agent-R1 instruction after each question, and the
// outcome reward named in cfg.Reward ("agent-r1" in DefaultConfig).
func NewMultiHopQA(r Retriever, cfg Config, search SearchToolConfig) (*Env, error) {
	tool, err := NewSearchTool(r, search)
	if err != nil {
		return nil, err
	}
	return New(cfg, tool)
}
