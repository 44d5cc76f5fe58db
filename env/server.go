package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ServerConfig bounds what one request to the retrieval server may ask.
type ServerConfig struct {
	DefaultTopK   int   // when a request names none (Search-R1's server: 3)
	MaxTopK       int   // larger requests are refused with 400
	MaxQueries    int   // queries per request
	MaxQueryChars int   // characters per query
	MaxBodyBytes  int64 // request body limit; larger bodies get 413
	// MaxConcurrent bounds searches in flight (each holds a score buffer of
	// 8 bytes per passage); 0 means 2 x GOMAXPROCS.
	MaxConcurrent int
}

// DefaultServerConfig returns conservative limits.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{DefaultTopK: 3, MaxTopK: 100, MaxQueries: 1024, MaxQueryChars: 4096, MaxBodyBytes: 4 << 20}
}

// Server serves a Retriever over HTTP with the APIs of Search-R1
// (POST /retrieve) and Agent-R1 (POST and GET /search), plus GET /health.
// A Server made with a nil Retriever is loading: /health answers 503
// {"status": "loading"} and searches 503, until Ready hands it the index,
// so a client polling /health as Agent-R1's scripts do waits for the build.
type Server struct {
	state atomic.Pointer[serverState]
	cfg   ServerConfig
	sem   chan struct{}
	mux   *http.ServeMux
}

type serverState struct {
	r        Retriever
	passages int
}

// Document is a passage as the servers return it: Search-R1's
// {"id", "contents"}, the "title" Agent-R1's tool reads, the body alone as
// "text" (BM25 retrievers of Search-R1 and FlashRAG return it), and KILT's
// "wikipedia_id" when the corpus has one.
type Document struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Contents    string `json:"contents"`
	Text        string `json:"text"`
	WikipediaID string `json:"wikipedia_id,omitempty"`
}

type scoredDocument struct {
	Document Document `json:"document"`
	Score    float64  `json:"score"`
}

// NewServer returns the HTTP handler; passages is reported by /health. A
// nil r starts it loading (see Server).
func NewServer(r Retriever, passages int, cfg ServerConfig) *Server {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 2 * runtime.GOMAXPROCS(0)
	}
	s := &Server{cfg: cfg, sem: make(chan struct{}, cfg.MaxConcurrent)}
	if r != nil {
		s.Ready(r, passages)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/retrieve", s.retrieve)
	s.mux.HandleFunc("/search", s.search)
	s.mux.HandleFunc("/health", s.health)
	return s
}

// Ready makes a loading server serve r.
func (s *Server) Ready(r Retriever, passages int) {
	s.state.Store(&serverState{r: r, passages: passages})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

var errLoading = &httpError{http.StatusServiceUnavailable, "the index is still loading; poll GET /health"}

type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var he *httpError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		code = he.code
	case errors.As(err, &mb):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// decode reads a JSON body under the size limit.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if r.Method != http.MethodPost {
		return &httpError{http.StatusMethodNotAllowed, "use POST"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return badRequest("request body: %v", err)
	}
	// One JSON value and nothing after it: a body with trailing bytes is
	// a client bug (two requests glued together, a cut-and-paste error),
	// never half-answered.
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
		return nil
	case err == nil:
		return badRequest("request body: more than one JSON value (trailing %.40s)", extra)
	default:
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return badRequest("request body: trailing bytes after the JSON value: %v", err)
	}
}

func (s *Server) checkQueries(queries []string, topk int) error {
	if len(queries) == 0 {
		return badRequest(`"queries" missing or empty`)
	}
	if len(queries) > s.cfg.MaxQueries {
		return badRequest("%d queries, at most %d per request", len(queries), s.cfg.MaxQueries)
	}
	for i, q := range queries {
		if n := utf8.RuneCountInString(q); n > s.cfg.MaxQueryChars {
			return badRequest("query %d has %d characters, at most %d", i, n, s.cfg.MaxQueryChars)
		}
	}
	if topk < 1 || topk > s.cfg.MaxTopK {
		return badRequest("top-k %d out of range 1..%d", topk, s.cfg.MaxTopK)
	}
	return nil
}

func (s *Server) run(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	st := s.state.Load()
	if st == nil {
		return nil, errLoading
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	return st.r.Retrieve(ctx, queries, k)
}

func toDocument(h Hit) Document {
	p := h.Passage
	return Document{ID: p.ID, Title: p.Title, Contents: p.Contents, Text: p.Text(), WikipediaID: p.WikipediaID}
}

// retrieve is Search-R1's POST /retrieve {queries, topk, return_scores}.
func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Queries      []string `json:"queries"`
		TopK         *int     `json:"topk"`
		ReturnScores bool     `json:"return_scores"`
	}
	if err := s.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	k := s.cfg.DefaultTopK
	if req.TopK != nil {
		k = *req.TopK
	}
	if err := s.checkQueries(req.Queries, k); err != nil {
		writeError(w, err)
		return
	}
	hits, err := s.run(r.Context(), req.Queries, k)
	if err != nil {
		writeError(w, err)
		return
	}
	result := make([]any, len(hits))
	for i, hs := range hits {
		if req.ReturnScores {
			docs := make([]scoredDocument, len(hs))
			for j, h := range hs {
				docs[j] = scoredDocument{toDocument(h), h.Score}
			}
			result[i] = docs
		} else {
			docs := make([]Document, len(hs))
			for j, h := range hs {
				docs[j] = toDocument(h)
			}
			result[i] = docs
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": result})
}

type queryResult struct {
	Query   string           `json:"query"`
	Results []scoredDocument `json:"results"`
}

// search is Agent-R1's POST /search {queries, top_k} and
// GET /search?query=&top_k=.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req struct {
		Queries []string `json:"queries"`
		Query   *string  `json:"query"` // Agent-R1's single-query form
		TopK    *int     `json:"top_k"`
	}
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		req.Queries = []string{q.Get("query")}
		if v := q.Get("top_k"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, badRequest("top_k %q is not an integer", v))
				return
			}
			req.TopK = &k
		}
		if strings.TrimSpace(req.Queries[0]) == "" {
			writeError(w, badRequest(`"query" missing`))
			return
		}
	} else if err := s.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	} else if req.Query != nil {
		if req.Queries != nil {
			writeError(w, badRequest(`give "query" or "queries", not both`))
			return
		}
		if strings.TrimSpace(*req.Query) == "" {
			writeError(w, badRequest(`"query" is empty`))
			return
		}
		req.Queries = []string{*req.Query}
	}
	k := 5 // Agent-R1's tool asks for 5
	if req.TopK != nil {
		k = *req.TopK
	}
	if err := s.checkQueries(req.Queries, k); err != nil {
		writeError(w, err)
		return
	}
	t0 := time.Now()
	hits, err := s.run(r.Context(), req.Queries, k)
	if err != nil {
		writeError(w, err)
		return
	}
	searchTime := time.Since(t0).Seconds()
	out := make([]queryResult, len(hits))
	for i, hs := range hits {
		out[i] = queryResult{Query: req.Queries[i], Results: make([]scoredDocument, len(hs))}
		for j, h := range hs {
			out[i].Results[j] = scoredDocument{toDocument(h), h.Score}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"query_results": out, "total_time": time.Since(start).Seconds(), "search_time": searchTime,
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, &httpError{http.StatusMethodNotAllowed, "use GET"})
		return
	}
	st := s.state.Load()
	if st == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "loading"})
		return
	}
	// Agent-R1's search_api answers {"status": "healthy"}.
	writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "passages": st.passages})
}
