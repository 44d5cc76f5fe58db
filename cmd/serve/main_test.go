package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

// TestServeModelFolder serves the default policy's warm start and answers
// GET /v1/models and a chat completion, with the folder's name as the
// model id, until its context ends.
func TestServeModelFolder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(lineWriter, 4)
	done := make(chan error, 1)
	go func() { done <- run(ctx, defaultConfig(), "../train/testdata/warmstart", "127.0.0.1:0", out) }()
	var base string
	select {
	case line := <-out:
		m := regexp.MustCompile(`on (http://\S+/v1)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no address in %q", line)
		}
		base = m[1]
	case err := <-done:
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatal("the server did not start")
	}
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []struct{ ID string } }
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Data) != 1 || list.Data[0].ID != "warmstart" {
		t.Fatalf("models %+v", list)
	}
	resp, err = http.Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"messages": [{"role": "user", "content": "Question: Who is the founder of the employer of Disonrar?"}], "max_tokens": 8}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"completion_tokens":`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), defaultConfig(), t.TempDir(), "127.0.0.1:0", io.Discard); err == nil {
		t.Fatal("an empty folder was served")
	}
	if isLoopback("0.0.0.0") || !isLoopback("127.0.0.1") || !isLoopback("::1") || !isLoopback("localhost") {
		t.Fatal("isLoopback")
	}
}
