package main

import (
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
	err = run([]string{"-corpus", corpus, "-build-only"})
	if err == nil || !strings.Contains(err.Error(), "c.jsonl line 2") {
		t.Fatalf("malformed corpus: %v", err)
	}
	if err := run([]string{"-corpus", corpus, "-build-only", "-skip-malformed", "-layout", "wiki18"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(corpus + ".bm25"); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-corpus", corpus, "-layout", "msmarco", "-build-only"}); err == nil {
		t.Fatal("bad layout accepted")
	}
	if err := run([]string{"-corpus", filepath.Join(dir, "missing.jsonl"), "-build-only"}); err == nil {
		t.Fatal("missing corpus accepted")
	}
}
