package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -config reads the same keys as the flags; later arguments win.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "retriever.yaml")
	os.WriteFile(cfgFile, []byte("corpus: wiki.jsonl\ntopk: 5\nk1: 1.2\nbuild-only: true\naddr: 127.0.0.1:9000\n"), 0o644)
	c, err := parseFlags([]string{"-config", cfgFile, "-topk", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if c.corpus != "wiki.jsonl" || c.index != "wiki.jsonl.bm25" || c.server.DefaultTopK != 7 || c.bm25.K1 != 1.2 || c.bm25.B != 0.4 || !c.buildOnly || c.addr != "127.0.0.1:9000" {
		t.Errorf("%+v", c)
	}
	c, err = parseFlags([]string{"-config", cfgFile, "topk=2", "index=/x.bm25"})
	if err != nil || c.server.DefaultTopK != 2 || c.index != "/x.bm25" {
		t.Errorf("%+v %v", c, err)
	}
	os.WriteFile(cfgFile, []byte("corpus: wiki.jsonl\ntop_k: 5\n"), 0o644)
	if _, err := parseFlags([]string{"-config", cfgFile}); err == nil || !strings.Contains(err.Error(), "top_k") {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := parseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// An empty corpus is an error naming the file, and a long build prints
// progress lines.
func TestBuildOnlyEmptyCorpusAndProgress(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(corpus, nil, 0o644)
	err := run(context.Background(), []string{"-corpus", corpus, "-build-only"}, nil)
	if err == nil || !strings.Contains(err.Error(), corpus) || !strings.Contains(err.Error(), "holds no passages") {
		t.Fatalf("empty corpus: %v", err)
	}
	var logs bytes.Buffer
	log.SetOutput(&logs)
	defer log.SetOutput(os.Stderr)
	var b strings.Builder
	for i := range 100001 {
		b.WriteString(`{"id": "` + string(rune('a'+i%26)) + `", "contents": "\"T\"\nword"}` + "\n")
	}
	corpus = filepath.Join(dir, "big.jsonl")
	os.WriteFile(corpus, []byte(b.String()), 0o644)
	if err := run(context.Background(), []string{"-corpus", corpus, "-build-only", "-workers", "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "opening "+corpus+".bm25") || !strings.Contains(out, "indexing "+corpus+": 100000 passages") {
		t.Errorf("log:\n%s", out)
	}
}
