package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r1go/r1go/env"
)

// dyingRetriever is a Search-R1 retriever that answers its first request
// (the start-up probe) with no hits and drops the connection of every
// later one.
func dyingRetriever(t *testing.T) string {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Write([]byte(`{"result": [[]]}`))
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

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

// TestDeadRetrieverFailsAtStart: env.retriever_url at a port where nothing
// listens stops train, with the built-in or external rollouts, before any
// work (no run folder), naming the URL and what came back. With
// env.retriever_wait the run waits for a retriever that comes up.
func TestDeadRetrieverFailsAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	dead := closedURL(t)
	for _, mode := range []string{"", "external"} {
		c := deadRetrieverConfig(t, dead)
		c.Trainer.DefaultLocalDir = filepath.Join(t.TempDir(), "run")
		if mode != "" {
			c.RL.Rollout.Mode, c.RL.Rollout.ExternalAddr = mode, "127.0.0.1:0"
		}
		start := time.Now()
		out, err := runConfig(t, &c)
		if err == nil || !strings.Contains(err.Error(), dead+"/retrieve") || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "env.retriever_wait") {
			t.Fatalf("rollout.mode %q: error %v, want the dead retriever named\n%s", mode, err, out)
		}
		if _, serr := os.Stat(c.Trainer.DefaultLocalDir); serr == nil {
			t.Errorf("rollout.mode %q: the run folder was made before the probe", mode)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("rollout.mode %q: failing took %v; the probe retries unasked", mode, d)
		}
	}

	// A retriever that starts late: served by env.NewServer, loading (503)
	// until it has its index.
	ix := startingRetriever(t, 500*time.Millisecond)
	c := deadRetrieverConfig(t, ix)
	c.Trainer.TotalSteps = 0
	c.Env.RetrieverWait = 20 * time.Second
	out, err := runConfig(t, &c)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "waiting up to env.retriever_wait 20s") || !strings.Contains(out, "HTTP 503") {
		t.Errorf("no line saying the run waits for the retriever:\n%s", out)
	}
}

// startingRetriever serves an empty retriever after delay, loading until
// then.
func startingRetriever(t *testing.T, delay time.Duration) string {
	t.Helper()
	s := env.NewServer(nil, 0, env.DefaultServerConfig())
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	go func() {
		time.Sleep(delay)
		s.Ready(emptyRetriever{}, 0)
	}()
	return srv.URL
}

type emptyRetriever struct{}

func (emptyRetriever) Retrieve(_ context.Context, queries []string, _ int) ([][]env.Hit, error) {
	return make([][]env.Hit, len(queries)), nil
}
