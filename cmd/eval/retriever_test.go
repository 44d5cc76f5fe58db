package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeadRetrieverFailsAtStart: env.retriever_url at a port where nothing
// listens stops eval before it loads a model, naming the URL and what came
// back.
func TestDeadRetrieverFailsAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	cfg := defaultConfig()
	cfg.Env.Retriever = dead
	cfg.Data.ValSize, cfg.Baselines, cfg.Slots = 2, []string{"agent"}, 2
	var out bytes.Buffer
	err = run(context.Background(), cfg, filepath.Join("..", "train", "testdata", "warmstart"), "", "", &out)
	if err == nil || !strings.Contains(err.Error(), dead+"/retrieve") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want the dead retriever named\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "eval:") {
		t.Errorf("eval started before the probe:\n%s", out.String())
	}
}
