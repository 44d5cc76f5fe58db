package env

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
)

// searchEnv is the multi-hop env over an HTTP retriever at url with the
// given env.retriever_timeout and env.retriever_retries.
func searchEnv(t *testing.T, url string, timeout time.Duration, retries int) *Env {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RetrieverTimeout, cfg.RetrieverRetries = timeout, retries
	cc := cfg.RetrieverClientConfig(url)
	cc.Backoff, cc.MaxBackoff = time.Millisecond, time.Millisecond
	c, err := NewSearchR1Client(cc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewMultiHopQA(c, cfg, DefaultSearchToolConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func searchTurn(q string) string {
	return "<think>t</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"" + q + "\"}}\n</tool_call>"
}

// A retriever that never answers costs one call env.retriever_timeout,
// not (retries+1) times it, and is counted as a timeout with its URL.
func TestHangingRetrieverIsBoundedAndCounted(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	const timeout = 300 * time.Millisecond
	e := searchEnv(t, srv.URL, timeout, 3)
	ep := e.NewEpisode()
	ep.Reset(data.Sample{Question: "q"})
	start := time.Now()
	res := ep.Step(context.Background(), searchTurn("Lake Vostok"))
	elapsed := time.Since(start)
	// The test finishing at all shows the bound: the handler never
	// answers before the test ends.
	t.Logf("hanging retriever, env.retriever_timeout=%v, retries=3: the call took %v (%.2fx the timeout), %d request(s)", timeout, elapsed, float64(elapsed)/float64(timeout), requests.Load())
	if res.Info.Success || res.Info.Calls[0].ErrorKind != ErrTimeout || !strings.Contains(res.Observation, "Error") {
		t.Fatalf("step %+v", res)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests: a hang must use the call's whole budget once, not repeat it", n)
	}
	snap := e.ToolStats().Take()
	if snap.Calls != 1 || snap.Errors != 1 || snap.ByKind[FaultTimeout] != 1 || snap.URL[FaultTimeout] != srv.URL+"/retrieve" {
		t.Errorf("stats %+v", snap)
	}
	if after := e.ToolStats().Snapshot(); after.Calls != 0 || after.ByKind != nil {
		t.Errorf("Take did not reset: %+v", after)
	}
}

func TestToolFaultKinds(t *testing.T) {
	httpErr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such index", http.StatusNotFound)
	}))
	defer httpErr.Close()
	parseErr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"hits": []}`))
	}))
	defer parseErr.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"result": [[{"document": {"id": "1", "contents": "\"T\"\nbody"}, "score": 1}]]}`))
	}))
	defer ok.Close()

	for _, tc := range []struct {
		url  string
		turn string
		kind FaultKind
	}{
		{httpErr.URL, searchTurn("x"), FaultHTTP},
		{parseErr.URL, searchTurn("x"), FaultParse},
		{deadURL, searchTurn("x"), FaultConnection},
		{ok.URL, searchTurn("x"), FaultOK},
		{ok.URL, searchTurn(" "), FaultInvalid},                                                      // blank query
		{ok.URL, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\n</tool_call>", FaultInvalid}, // broken JSON
		{ok.URL, "<tool_call>\n{\"name\": \"browse\", \"arguments\": {}}\n</tool_call>", FaultInvalid},
	} {
		e := searchEnv(t, tc.url, 2*time.Second, 1)
		ep := e.NewEpisode()
		ep.Reset(data.Sample{Question: "q"})
		ep.Step(context.Background(), tc.turn)
		s := e.ToolStats().Snapshot()
		m := s.Metrics()
		switch tc.kind {
		case FaultOK:
			if m["tool/calls"] != 1 || m["tool/errors"] != 0 || m["tool/invalid"] != 0 {
				t.Errorf("ok: %v", m)
			}
		case FaultInvalid:
			if m["tool/calls"] != 1 || m["tool/errors"] != 0 || m["tool/invalid"] != 1 {
				t.Errorf("%q: %v", tc.turn, m)
			}
		default:
			k, u := s.WorstKind()
			if m["tool/errors"] != 1 || m["tool/errors/"+string(tc.kind)] != 1 || k != tc.kind || !strings.HasPrefix(u, tc.url) {
				t.Errorf("%s: metrics %v, worst %s %s", tc.kind, m, k, u)
			}
		}
	}
	if names := MetricNames(); len(names) != 8 || names[0] != "tool/calls" || names[2] != "tool/errors/connection" {
		t.Errorf("metric names %v", names)
	}
}
