package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	c, err := parseFlags([]string{"-corpus", "x.jsonl", "-k1", "1.2", "-b", "0.75"})
	if err != nil || c.index != "x.jsonl.bm25" || c.bm25.K1 != 1.2 || c.bm25.B != 0.75 || c.addr != "127.0.0.1:8000" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := parseFlags(nil); err == nil {
		t.Fatal("missing -corpus accepted")
	}
	if _, err := parseFlags([]string{"-corpus", "x", "-topk", "500"}); err == nil {
		t.Fatal("-topk over -max-topk accepted")
	}
	for addr, want := range map[string]bool{"127.0.0.1:8000": true, "localhost:1": true, "[::1]:80": true, "0.0.0.0:8000": false, ":8000": false} {
		if isLoopback(addr) != want {
			t.Errorf("isLoopback(%q) != %v", addr, want)
		}
	}
}

func TestBuildOnlyAndBadInput(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../data/testdata/corpus_malformed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "c.jsonl")
	os.WriteFile(corpus, b, 0o644)
	err = run(context.Background(), []string{"-corpus", corpus, "-build-only"}, nil)
	if err == nil || !strings.Contains(err.Error(), "c.jsonl line 2") {
		t.Fatalf("malformed corpus: %v", err)
	}
	if err := run(context.Background(), []string{"-corpus", corpus, "-build-only", "-skip-malformed", "-layout", "wiki18"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(corpus + ".bm25"); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"-corpus", corpus, "-layout", "msmarco", "-build-only"}, nil); err == nil {
		t.Fatal("bad layout accepted")
	}
	if err := run(context.Background(), []string{"-corpus", filepath.Join(dir, "missing.jsonl"), "-build-only"}, nil); err == nil {
		t.Fatal("missing corpus accepted")
	}
}

// TestServe starts the command on a free loopback port, asks it a
// Search-R1 question and stops it.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../data/testdata/corpus_kilt.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "kilt.jsonl")
	os.WriteFile(corpus, b, 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-corpus", corpus, "-addr", "127.0.0.1:0", "-layout", "kilt"}, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("server ended: %v", err)
	}
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", strings.NewReader(`{"queries": ["Genentech biotechnology"], "topk": 1, "return_scores": true}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result [][]struct {
			Document struct{ ID, Title, Contents string }
			Score    float64
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Result) != 1 || len(out.Result[0]) != 1 || out.Result[0][0].Document.ID != "1007" || out.Result[0][0].Document.Title != "Genentech" || out.Result[0][0].Score <= 0 {
		t.Fatalf("%v %+v", err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
