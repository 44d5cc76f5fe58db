package env

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/r1go/r1go/data"
)

// ClientConfig configures the HTTP retriever clients.
type ClientConfig struct {
	// URL is the server's base ("http://127.0.0.1:8000") or the full
	// endpoint ("http://127.0.0.1:8000/retrieve"), as verl configures it.
	URL string
	// Timeout bounds one attempt (verl: 30 s).
	Timeout time.Duration
	// CallTimeout, when positive, bounds one request with all its attempts
	// and back-off waits: a hanging retriever costs at most this much per
	// call, however many retries are allowed (env.retriever_timeout).
	CallTimeout time.Duration
	// Retries is how many times a failed attempt is repeated.
	Retries int
	// Backoff is the first wait between attempts; it doubles each time, up
	// to MaxBackoff, with up to 50% random jitter.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// MaxBatch splits larger query batches into several requests.
	MaxBatch int
	// MaxResponseBytes bounds a response body.
	MaxResponseBytes int64
	HTTPClient       *http.Client // nil means a default client
}

// DefaultClientConfig returns verl-like settings for url.
func DefaultClientConfig(url string) ClientConfig {
	return ClientConfig{URL: url, Timeout: 30 * time.Second, Retries: 3, Backoff: 250 * time.Millisecond,
		MaxBackoff: 8 * time.Second, MaxBatch: 512, MaxResponseBytes: 256 << 20}
}

// ClientError is a retriever request that failed after all attempts.
type ClientError struct {
	URL      string
	Attempts int
	Err      error
}

func (e *ClientError) Error() string {
	return fmt.Sprintf("env: retriever %s: failed after %d attempt(s): %v", e.URL, e.Attempts, e.Err)
}

func (e *ClientError) Unwrap() error { return e.Err }

// StatusError is a retriever answer with an HTTP status other than 200.
type StatusError struct {
	Code int
	Body string // the first 200 bytes
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// ResponseError is a 200 answer the client could not read: not JSON, or
// JSON of the wrong shape.
type ResponseError struct{ Err error }

func (e *ResponseError) Error() string { return e.Err.Error() }
func (e *ResponseError) Unwrap() error { return e.Err }

// retryable marks an attempt error worth repeating.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

type client struct {
	cfg      ClientConfig
	endpoint string
	hc       *http.Client
}

func newClient(cfg ClientConfig, path string) (*client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("env: retriever URL %q: want http(s)://host[:port][/path]", cfg.URL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	if cfg.Timeout <= 0 || cfg.Retries < 0 || cfg.MaxBatch <= 0 || cfg.MaxResponseBytes <= 0 || cfg.CallTimeout < 0 {
		return nil, fmt.Errorf("env: retriever client: timeout, max batch and max response must be positive, retries and call timeout >= 0")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &client{cfg: cfg, endpoint: u.String(), hc: hc}, nil
}

// post sends body and decodes the JSON answer into out, retrying
// transport errors, timeouts, 429, 5xx, and cut or garbled bodies.
func (c *client) post(ctx context.Context, body []byte, decode func([]byte) error) error {
	if c.cfg.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	var last error
	wait := c.cfg.Backoff
	attempts := 0
	for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
		if attempt > 0 {
			d := wait + time.Duration(rand.Int64N(int64(wait)/2+1))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return &ClientError{c.endpoint, attempts, fmt.Errorf("%w (last error: %v)", ctx.Err(), last)}
			}
			wait = min(2*wait, c.cfg.MaxBackoff)
		}
		attempts++
		err := c.attempt(ctx, http.MethodPost, c.endpoint, body, decode)
		if err == nil {
			return nil
		}
		last = err
		var r retryable
		if !errors.As(err, &r) || ctx.Err() != nil {
			break
		}
	}
	return &ClientError{c.endpoint, attempts, last}
}

// attempt makes one request: a POST of body, or a GET when body is nil.
// A nil decode accepts any 200 answer.
func (c *client) attempt(ctx context.Context, method, endpoint string, body []byte, decode func([]byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return retryable{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return retryable{fmt.Errorf("reading response: %w", err)}
	}
	if int64(len(b)) > c.cfg.MaxResponseBytes {
		return &ResponseError{fmt.Errorf("response over %d bytes", c.cfg.MaxResponseBytes)}
	}
	if resp.StatusCode != http.StatusOK {
		body := strings.TrimSpace(string(b))
		if len(body) > 200 {
			body = body[:200]
		}
		err := &StatusError{Code: resp.StatusCode, Body: body}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return retryable{err}
		}
		return err
	}
	if decode == nil {
		return nil
	}
	if !json.Valid(b) {
		return retryable{&ResponseError{fmt.Errorf("response is not valid JSON (%d bytes, starts %.80q)", len(b), b)}}
	}
	if err := decode(b); err != nil {
		return &ResponseError{err}
	}
	return nil
}

// batches calls fn on consecutive slices of at most MaxBatch queries.
func (c *client) batches(queries []string, fn func(lo, hi int) error) error {
	for lo := 0; lo < len(queries); lo += c.cfg.MaxBatch {
		if err := fn(lo, min(lo+c.cfg.MaxBatch, len(queries))); err != nil {
			return err
		}
	}
	return nil
}

// wireDoc accepts a document as the Python servers write it: id as string
// or number, title optional (then the first line of contents).
type wireDoc struct {
	ID          json.RawMessage `json:"id"`
	Title       *string         `json:"title"`
	Contents    *string         `json:"contents"`
	WikipediaID json.RawMessage `json:"wikipedia_id"`
}

func (d wireDoc) passage(where string) (data.Passage, error) {
	if d.Contents == nil {
		return data.Passage{}, fmt.Errorf("%s: document has no \"contents\"", where)
	}
	p := data.Passage{Contents: *d.Contents}
	if len(d.ID) > 0 && string(d.ID) != "null" {
		var s string
		if json.Unmarshal(d.ID, &s) == nil {
			p.ID = s
		} else {
			p.ID = string(d.ID)
		}
	}
	if len(d.WikipediaID) > 0 && string(d.WikipediaID) != "null" {
		var s string
		if json.Unmarshal(d.WikipediaID, &s) == nil {
			p.WikipediaID = s
		} else {
			p.WikipediaID = string(d.WikipediaID)
		}
	}
	if d.Title != nil {
		p.Title = *d.Title
	} else {
		first, _, _ := strings.Cut(p.Contents, "\n")
		p.Title = strings.Trim(first, `"`)
	}
	return p, nil
}

// SearchR1Client calls a Search-R1 retrieval server, POST /retrieve with
// {"queries", "topk", "return_scores": true}.
type SearchR1Client struct{ c *client }

// NewSearchR1Client checks the config.
func NewSearchR1Client(cfg ClientConfig) (*SearchR1Client, error) {
	c, err := newClient(cfg, "/retrieve")
	if err != nil {
		return nil, err
	}
	return &SearchR1Client{c}, nil
}

// Retrieve implements Retriever.
func (s *SearchR1Client) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	out := make([][]Hit, 0, len(queries))
	err := s.c.batches(queries, func(lo, hi int) error {
		body, _ := json.Marshal(map[string]any{"queries": queries[lo:hi], "topk": k, "return_scores": true})
		return s.c.post(ctx, body, func(b []byte) error {
			hits, err := decodeRetrieve(b, hi-lo)
			out = append(out, hits...)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeRetrieve reads a /retrieve answer to n queries.
func decodeRetrieve(b []byte, n int) ([][]Hit, error) {
	var resp struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &resp); err != nil || resp.Result == nil {
		return nil, fmt.Errorf(`response has no "result" list`)
	}
	if len(resp.Result) > 0 && bytes.HasPrefix(bytes.TrimSpace(resp.Result[0]), []byte("{")) {
		return nil, fmt.Errorf(`"result" is a flat list of documents, not one list per query (the reference server's broken return_scores=false answer)`)
	}
	if len(resp.Result) != n {
		return nil, fmt.Errorf("response has %d result lists for %d queries", len(resp.Result), n)
	}
	out := make([][]Hit, 0, n)
	for i, raw := range resp.Result {
		var items []struct {
			wireDoc
			Document *wireDoc `json:"document"`
			Score    *float64 `json:"score"`
		}
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("result %d is not a list of documents: %v", i, err)
		}
		hits := make([]Hit, len(items))
		for j, it := range items {
			d := it.wireDoc
			if it.Document != nil {
				d = *it.Document
			}
			p, err := d.passage(fmt.Sprintf("result %d hit %d", i, j))
			if err != nil {
				return nil, err
			}
			hits[j] = Hit{Passage: p}
			if it.Score != nil {
				hits[j].Score = *it.Score
			}
		}
		out = append(out, hits)
	}
	return out, nil
}

// AgentR1Client calls Agent-R1's search server, POST /search with
// {"queries", "top_k"}.
type AgentR1Client struct{ c *client }

// NewAgentR1Client checks the config.
func NewAgentR1Client(cfg ClientConfig) (*AgentR1Client, error) {
	c, err := newClient(cfg, "/search")
	if err != nil {
		return nil, err
	}
	return &AgentR1Client{c}, nil
}

// Retrieve implements Retriever.
func (a *AgentR1Client) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	out := make([][]Hit, 0, len(queries))
	err := a.c.batches(queries, func(lo, hi int) error {
		body, _ := json.Marshal(map[string]any{"queries": queries[lo:hi], "top_k": k})
		return a.c.post(ctx, body, func(b []byte) error {
			var resp struct {
				QueryResults *[]struct {
					Query   string `json:"query"`
					Results []struct {
						Document *wireDoc `json:"document"`
						Score    float64  `json:"score"`
					} `json:"results"`
				} `json:"query_results"`
			}
			if err := json.Unmarshal(b, &resp); err != nil {
				return fmt.Errorf("response shape: %v", err)
			}
			if resp.QueryResults == nil {
				return fmt.Errorf(`response has no "query_results"`)
			}
			qr := *resp.QueryResults
			if len(qr) != hi-lo {
				return fmt.Errorf("response has %d query results for %d queries", len(qr), hi-lo)
			}
			for i, r := range qr {
				hits := make([]Hit, len(r.Results))
				for j, it := range r.Results {
					if it.Document == nil {
						return fmt.Errorf("query result %d hit %d has no \"document\"", i, j)
					}
					p, err := it.Document.passage(fmt.Sprintf("query result %d hit %d", i, j))
					if err != nil {
						return err
					}
					hits[j] = Hit{Passage: p, Score: it.Score}
				}
				out = append(out, hits)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RetrieverClientConfig is the client config for an HTTP retriever at url
// under env.retriever_timeout and env.retriever_retries: each attempt and
// the whole request (attempts and back-off together) are bounded by
// RetrieverTimeout, so a hanging server costs one call at most that long;
// the retries serve the fast failures (a refused connection, a 503).
func (c Config) RetrieverClientConfig(url string) ClientConfig {
	cc := DefaultClientConfig(url)
	if c.RetrieverTimeout > 0 {
		cc.Timeout, cc.CallTimeout = c.RetrieverTimeout, c.RetrieverTimeout
	}
	cc.Retries = c.RetrieverRetries
	return cc
}
