package env

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// closedURL is an http URL of a port where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A retriever is probed once before any work: a Search-R1 server with one
// query, an Agent-R1 server with GET /health. Whatever comes back that is
// not a working answer is an error naming the URL and what came back.
func TestProbeNamesURLAndAnswer(t *testing.T) {
	srv, _ := fixtureServer(t)
	flat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"result": [{"id": "0", "contents": "\"A\"\nb"}]}`)) // the reference server's broken return_scores=false answer
	}))
	defer flat.Close()
	var served atomic.Int32
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		http.Error(w, "upstream gone", http.StatusBadGateway)
	}))
	defer counting.Close()
	dead := closedURL(t)
	for _, tc := range []struct {
		name, url string
		agentR1   bool
		want      []string // "" entries: the probe answers
	}{
		{"search-r1 up", srv.URL, false, nil},
		{"agent-r1 up", srv.URL, true, nil},
		{"search-r1 dead", dead, false, []string{dead + "/retrieve", "connection refused"}},
		{"agent-r1 dead", dead, true, []string{dead + "/health", "connection refused"}},
		{"wrong path", srv.URL + "/v1/retrieve", false, []string{srv.URL + "/v1/retrieve", "HTTP 404"}},
		{"flat result", flat.URL, false, []string{flat.URL + "/retrieve", "flat list of documents"}},
		{"bad gateway", counting.URL, false, []string{counting.URL + "/retrieve", "HTTP 502", "upstream gone"}},
	} {
		var p Prober
		var err error
		cfg := fastClient(tc.url)
		if tc.agentR1 {
			p, err = NewAgentR1Client(cfg)
		} else {
			p, err = NewSearchR1Client(cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		err = WaitReady(context.Background(), p, 0, nil)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var pe *ProbeError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: error %v, want a ProbeError", tc.name, err)
		}
		for _, w := range append(tc.want, "env.retriever_wait") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", tc.name, err, w)
			}
		}
	}
	// Unasked, the probe does not retry: the client's retries
	// (env.retriever_retries) serve the calls of the run, not the check.
	if n := served.Load(); n != 1 {
		t.Errorf("the 502 server saw %d probes, want 1", n)
	}
}

// env.retriever_wait waits for a retriever that is starting: probes with
// back-off until it answers or the wait is over, and fails at once on an
// answer that waiting cannot change.
func TestWaitReady(t *testing.T) {
	ix, _ := buildFixture(t, AnalyzerConfig{})
	loading := NewServer(nil, 0, DefaultServerConfig()) // answers 503 until Ready
	srv := httptest.NewServer(loading)
	defer srv.Close()
	go func() {
		time.Sleep(400 * time.Millisecond)
		loading.Ready(ix, ix.Len())
	}()
	var lines []string
	log := func(s string) { lines = append(lines, s) }
	for _, agentR1 := range []bool{false, true} {
		var p Prober
		if agentR1 {
			p, _ = NewAgentR1Client(fastClient(srv.URL))
		} else {
			p, _ = NewSearchR1Client(fastClient(srv.URL))
		}
		start := time.Now()
		if err := WaitReady(context.Background(), p, 10*time.Second, log); err != nil {
			t.Fatalf("agent-r1 %v: %v", agentR1, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
	}
	if len(lines) == 0 || !strings.Contains(lines[0], srv.URL) || !strings.Contains(lines[0], "HTTP 503") || !strings.Contains(lines[0], "env.retriever_wait 10s") {
		t.Errorf("log %q, want a line naming the URL, what came back and the wait", lines)
	}

	// Nothing comes up: the wait ends with the last answer.
	dead := closedURL(t)
	p, _ := NewSearchR1Client(fastClient(dead))
	start := time.Now()
	err := WaitReady(context.Background(), p, 600*time.Millisecond, nil)
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Attempts < 2 || !strings.Contains(err.Error(), "within env.retriever_wait 600ms") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want the wait and the last answer after several probes", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 3*time.Second {
		t.Errorf("gave up after %v, want about 600ms", d)
	}

	// A 404 does not change by waiting: refused at the first probe.
	up, _ := fixtureServer(t)
	p, _ = NewSearchR1Client(fastClient(up.URL + "/nowhere"))
	start = time.Now()
	err = WaitReady(context.Background(), p, 10*time.Second, nil)
	if !errors.As(err, &pe) || pe.Attempts != 1 || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("error %v, want the 404 at once", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("waited on a 404")
	}
}
