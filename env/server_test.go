package env

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
)

func fixtureServer(t *testing.T) (*httptest.Server, *Index) {
	t.Helper()
	ix, _ := buildFixture(t, AnalyzerConfig{})
	srv := httptest.NewServer(NewServer(ix, ix.Len(), DefaultServerConfig()))
	t.Cleanup(srv.Close)
	return srv, ix
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: body not JSON: %v", url, err)
	}
	return resp.StatusCode, out
}

func TestServerRetrieveShapes(t *testing.T) {
	srv, ix := fixtureServer(t)
	want, _ := ix.Search("Where was Marie Curie born?", 2)

	code, out := postJSON(t, srv.URL+"/retrieve", `{"queries": ["Where was Marie Curie born?", "Lake Vostok"], "topk": 2, "return_scores": true}`)
	if code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	res := out["result"].([]any)
	first := res[0].([]any)[0].(map[string]any)
	doc := first["document"].(map[string]any)
	if len(res) != 2 || len(res[0].([]any)) != 2 || doc["id"] != want[0].Passage.ID || doc["contents"] != want[0].Passage.Contents || first["score"].(float64) != want[0].Score {
		t.Fatalf("%v", out)
	}
	// without scores: plain documents, default top-k 3
	code, out = postJSON(t, srv.URL+"/retrieve", `{"queries": ["Marie Curie Warsaw Poland"]}`)
	res = out["result"].([]any)
	if code != 200 || len(res[0].([]any)) != 3 || res[0].([]any)[0].(map[string]any)["contents"] == nil {
		t.Fatalf("%d %v", code, out)
	}
}

func TestServerSearchShapes(t *testing.T) {
	srv, _ := fixtureServer(t)
	code, out := postJSON(t, srv.URL+"/search", `{"queries": ["Nobel Prize"], "top_k": 2}`)
	qr := out["query_results"].([]any)[0].(map[string]any)
	if code != 200 || qr["query"] != "Nobel Prize" || len(qr["results"].([]any)) != 2 || out["search_time"] == nil {
		t.Fatalf("%d %v", code, out)
	}
	resp, err := http.Get(srv.URL + "/search?query=Genentech&top_k=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	hit := got["query_results"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)["document"].(map[string]any)
	if resp.StatusCode != 200 || hit["title"] != "Genentech" {
		t.Fatalf("%v", got)
	}
	hr, err := http.Get(srv.URL + "/health")
	if err != nil || hr.StatusCode != 200 {
		t.Fatalf("health %v %v", hr, err)
	}
	hr.Body.Close()
}

func TestServerRejectsBadRequests(t *testing.T) {
	ix, _ := buildFixture(t, AnalyzerConfig{})
	cfg := DefaultServerConfig()
	cfg.MaxBodyBytes, cfg.MaxQueries, cfg.MaxTopK, cfg.MaxQueryChars = 2000, 3, 10, 50
	srv := httptest.NewServer(NewServer(ix, ix.Len(), cfg))
	defer srv.Close()
	cases := []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/retrieve", `{"queries": ["a"], "topk": 11}`, 400, "top-k 11"},
		{"/retrieve", `{"queries": ["a"], "topk": 0}`, 400, "top-k 0"},
		{"/retrieve", `{"queries": []}`, 400, "queries"},
		{"/retrieve", `{"queries": ["a","b","c","d"]}`, 400, "4 queries"},
		{"/retrieve", `{"queries": ["` + strings.Repeat("x", 51) + `"]}`, 400, "51 characters"},
		{"/retrieve", `{"queries": "a"}`, 400, "request body"},
		{"/retrieve", `{"queries": [`, 400, "request body"},
		{"/retrieve", `{"queries": ["` + strings.Repeat("x", 3000) + `"]}`, 413, "too large"},
		{"/search", `{"queries": ["a"], "top_k": 1000}`, 400, "top-k 1000"},
	}
	for _, c := range cases {
		code, out := postJSON(t, srv.URL+c.path, c.body)
		if code != c.code || !strings.Contains(out["error"].(string), c.msg) {
			t.Errorf("%s %.40s: %d %v, want %d %q", c.path, c.body, code, out, c.code, c.msg)
		}
	}
	resp, _ := http.Get(srv.URL + "/retrieve")
	if resp.StatusCode != 405 {
		t.Errorf("GET /retrieve: %d", resp.StatusCode)
	}
	resp.Body.Close()
	resp, _ = http.Get(srv.URL + "/search?query=a&top_k=x")
	if resp.StatusCode != 400 {
		t.Errorf("bad top_k: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func fastClient(url string) ClientConfig {
	c := DefaultClientConfig(url)
	c.Timeout, c.Backoff, c.MaxBackoff, c.Retries = 300*time.Millisecond, time.Millisecond, 5*time.Millisecond, 2
	return c
}

func TestClientsAgainstOwnServer(t *testing.T) {
	srv, ix := fixtureServer(t)
	queries := []string{"Where was Marie Curie born?", "Vostok Station founded", "Genentech"}
	var want [][]Hit
	for _, q := range queries {
		h, _ := ix.Search(q, 4)
		want = append(want, h)
	}
	sr, err := NewSearchR1Client(fastClient(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastClient(srv.URL + "/search")
	cfg.MaxBatch = 2 // three queries: two requests
	ar, err := NewAgentR1Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Retriever{"search-r1": sr, "agent-r1": ar} {
		got, err := r.Retrieve(context.Background(), queries, 4)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d lists", name, len(got))
		}
		for i := range want {
			for j := range want[i] {
				g, w := got[i][j], want[i][j]
				if g.Passage != w.Passage || g.Score != w.Score {
					t.Errorf("%s q%d hit %d: %+v want %+v", name, i, j, g, w)
				}
			}
		}
	}
}

// failingServer fails in the way named by mode, for the first n requests
// (n < 0: always), then answers like Search-R1.
func failingServer(t *testing.T, mode string, n int64) (*httptest.Server, *atomic.Int64) {
	var count atomic.Int64
	good := `{"result": [[{"document": {"id": "0", "contents": "\"T\"\nbody"}, "score": 1.5}]]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := count.Add(1)
		if n >= 0 && i > n {
			io.WriteString(w, good)
			return
		}
		switch mode {
		case "500":
			http.Error(w, "boom", 500)
		case "429":
			http.Error(w, "slow down", 429)
		case "400":
			http.Error(w, "bad", 400)
		case "slow":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		case "garbage":
			io.WriteString(w, "<html>proxy error</html>")
		case "truncated":
			w.Header().Set("Content-Length", "500")
			io.WriteString(w, good[:20])
			// the handler returns early: the client sees an unexpected EOF
		case "hangup":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		case "flat":
			io.WriteString(w, `{"result": [{"id": "0", "contents": "x"}, {"id": "1", "contents": "y"}]}`)
		case "count":
			io.WriteString(w, `{"result": [[], []]}`)
		case "nocontents":
			io.WriteString(w, `{"result": [[{"document": {"id": "0"}, "score": 1}]]}`)
		case "huge":
			io.WriteString(w, `{"result": [[{"document": {"id": "0", "contents": "`+strings.Repeat("x", 5000)+`"}}]]}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

func TestClientFailures(t *testing.T) {
	cases := []struct {
		mode      string
		n         int64
		ok        bool
		attempts  int64
		errSubstr string
	}{
		{"500", 2, true, 3, ""},
		{"429", 1, true, 2, ""},
		{"garbage", 1, true, 2, ""},
		{"truncated", 1, true, 2, ""},
		{"hangup", 1, true, 2, ""},
		{"slow", 1, true, 2, ""},
		{"500", -1, false, 3, "HTTP 500"},
		{"slow", -1, false, 3, "deadline exceeded"},
		{"garbage", -1, false, 3, "not valid JSON"},
		{"truncated", -1, false, 3, "unexpected EOF"},
		{"400", -1, false, 1, "HTTP 400"},
		{"flat", -1, false, 1, "flat list"},
		{"count", -1, false, 1, "2 result lists for 1 queries"},
		{"nocontents", -1, false, 1, `no "contents"`},
		{"huge", -1, false, 1, "response over 1000 bytes"},
	}
	for _, c := range cases {
		srv, count := failingServer(t, c.mode, c.n)
		cfg := fastClient(srv.URL)
		cfg.MaxResponseBytes = 1000
		cl, err := NewSearchR1Client(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hits, err := cl.Retrieve(context.Background(), []string{"q"}, 1)
		if c.ok {
			if err != nil || len(hits) != 1 || hits[0][0].Passage.Title != "T" || hits[0][0].Passage.Contents != "\"T\"\nbody" || hits[0][0].Score != 1.5 {
				t.Errorf("%s x%d: %v %+v", c.mode, c.n, err, hits)
			}
		} else {
			var ce *ClientError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.errSubstr) || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("%s: error %v, want ClientError with %q", c.mode, err, c.errSubstr)
			}
		}
		if got := count.Load(); got != c.attempts {
			t.Errorf("%s x%d: %d attempts, want %d", c.mode, c.n, got, c.attempts)
		}
	}
}

func TestClientDeadServerAndCancel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here now
	cl, _ := NewAgentR1Client(fastClient("http://" + addr))
	if _, err := cl.Retrieve(context.Background(), []string{"q"}, 1); err == nil || !strings.Contains(err.Error(), "3 attempt") {
		t.Fatalf("dead server: %v", err)
	}
	srv, _ := failingServer(t, "500", -1)
	cfg := fastClient(srv.URL)
	cfg.Backoff, cfg.MaxBackoff = time.Hour, time.Hour
	cl2, _ := NewSearchR1Client(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := cl2.Retrieve(ctx, []string{"q"}, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancel during back-off: %v", err)
	}
	for _, bad := range []string{"", "ftp://x", "http://"} {
		if _, err := NewSearchR1Client(fastClient(bad)); err == nil {
			t.Errorf("URL %q accepted", bad)
		}
	}
}

func TestSearchToolFormatsAndErrors(t *testing.T) {
	ix, _ := buildFixture(t, AnalyzerConfig{})
	tool, err := NewSearchTool(ix, SearchToolConfig{TopK: 2, Format: FormatSearchR1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Call(context.Background(), json.RawMessage(`{"query": "Genentech biotechnology"}`))
	if err != nil || !res.Success || !strings.HasPrefix(res.Content, "Doc 1(Title: \"Genentech\") Genentech Genentech, Inc., is an American") || strings.Count(res.Content, "\nDoc ") != 1 {
		t.Fatalf("%v %q", err, res.Content)
	}
	hits := []Hit{{Passage: data.Passage{ID: "1", Title: "A<&>", Contents: "\"A<&>\"\nline\twith \"quotes\" é\u2028\x01"}}}
	got := FormatHits(hits, FormatAgentR1)
	// Python: json.dumps({"results": [{"content": c, "title": t}]}, ensure_ascii=False)
	want := `{"results": [{"content": "\"A<&>\"\nline\twith \"quotes\" é` + "\u2028" + `\u0001", "title": "A<&>"}]}`
	if got != want {
		t.Fatalf("agent-r1 format\n%s\nwant\n%s", got, want)
	}
	// verl; the expected text is Python's output for verl's _passages2string
	// and json.dumps({"result": "\n---\n".join(...)}) on the same hits
	two := []Hit{{Passage: data.Passage{Contents: "\"A\"\nx y"}}, {Passage: data.Passage{Contents: "B"}}}
	vt, _ := NewSearchTool(fixedRetriever{two}, SearchToolConfig{TopK: 2, Format: FormatVerl, QueryList: true})
	res, err = vt.Call(context.Background(), json.RawMessage(`{"query_list": ["q1", "q2"]}`))
	wantVerl := `{"result": "Doc 1 (Title: \"A\")\nx y\n\nDoc 2 (Title: B)\n---\nDoc 1 (Title: \"A\")\nx y\n\nDoc 2 (Title: B)"}`
	if err != nil || res.Content != wantVerl {
		t.Fatalf("verl format %v\n%s\nwant\n%s", err, res.Content, wantVerl)
	}
	if _, err := tool.Call(context.Background(), json.RawMessage(`{"query": "  "}`)); err == nil {
		t.Fatal("blank query accepted")
	}

	// a dead retriever becomes an error observation through the env
	srv, _ := failingServer(t, "500", -1)
	cl, _ := NewSearchR1Client(fastClient(srv.URL))
	dead, _ := NewSearchTool(cl, DefaultSearchToolConfig())
	e, err := New(DefaultConfig(), dead)
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(data.Sample{Question: "q"})
	r := ep.Step(context.Background(), call(`{"name": "search", "arguments": {"query": "x"}}`))
	if r.Done || r.Info.ErrorKind != ErrTool || !strings.Contains(r.Observation, "<tool_response>\nError: search: env: retriever") {
		t.Fatalf("%+v", r)
	}

	// verl's query_list schema
	ql, _ := NewSearchTool(ix, SearchToolConfig{TopK: 1, Format: FormatSearchR1, QueryList: true, MaxQueries: 2})
	vc := VerlConfig()
	vc.MaxResponseChars = 0
	e2, err := New(vc, ql)
	if err != nil {
		t.Fatal(err)
	}
	ep = e2.NewEpisode()
	ep.Reset(data.Sample{})
	r = ep.Step(context.Background(), call(`{"name": "search", "arguments": {"query_list": ["Warsaw capital", "Lake Vostok"]}}`))
	if !r.Info.Success || strings.Count(r.Messages[0].Content, "Doc 1(") != 2 || !strings.Contains(r.Messages[0].Content, "\n---\n") {
		t.Fatalf("%+v", r)
	}
	r = ep.Step(context.Background(), call(`{"name": "search", "arguments": {"query_list": "Warsaw"}}`))
	if r.Info.ErrorKind != ErrInvalidArguments {
		t.Fatalf("%+v", r.Info)
	}
}

// fixedRetriever answers every query with the same hits.
type fixedRetriever struct{ hits []Hit }

func (f fixedRetriever) Retrieve(_ context.Context, qs []string, k int) ([][]Hit, error) {
	out := make([][]Hit, len(qs))
	for i := range out {
		out[i] = f.hits
	}
	return out, nil
}
