package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// A model folder whose weights hold NaN is refused with the tensor named,
// before any line is scored.
func TestScoreRefusesNonFiniteWeights(t *testing.T) {
	src := filepath.Join("..", "train", "testdata", "warmstart")
	m, err := model.Load(src, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]float32, m.NumParams())
	m.Dev.Download(host, m.Params)
	host[len(host)-1] = float32(math.NaN()) // the last tensor: the final norm
	m.Dev.Upload(m.Params, host)
	dir := filepath.Join(t.TempDir(), "nan")
	if err := m.Save(dir, nil, model.SaveOptions{DType: "float32", TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	ts := m.Tensors()
	last := ts[len(ts)-1].Name
	err = run(dir, dir, "-", filepath.Join(t.TempDir(), "out.jsonl"), 4096, false)
	if err == nil || !strings.Contains(err.Error(), last) || !strings.Contains(err.Error(), "1 NaN") {
		t.Fatalf("score of NaN weights: %v (want the tensor %s named)", err, last)
	}
}

// -config sets the keys, a later argument wins over the file, an unknown
// key or a bad value names the file and the key, and -model is required.
func TestScoreConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "score.yaml")
	os.WriteFile(path, []byte("model: /models/qwen\nbatch-tokens: 1024\nskip-bad: true\n"), 0o644)
	c, err := parseArgs([]string{"-config", path, "-model", "/mine"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "/mine" || c.Tokenizer != "/mine" || c.BatchTokens != 1024 || !c.SkipBad || c.Input != "-" {
		t.Fatalf("%+v: want model /mine (the argument wins), tokenizer from it, batch-tokens 1024, skip-bad", c)
	}
	if c, err = parseArgs([]string{"-config", path, "batch-tokens=7", "tokenizer=/tok"}, io.Discard); err != nil || c.BatchTokens != 7 || c.Tokenizer != "/tok" {
		t.Errorf("%+v %v", c, err)
	}
	for body, want := range map[string]string{"model: x\nbatch-tokens: many\n": "batch-tokens", "modle: x\n": "modle", "batch-tokens: 5\n": "model is required",
		"model: x\nbatch-tokens: 0\n": "batch-tokens 0"} {
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := parseArgs([]string{"-config", path}, io.Discard); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "score") {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
	var help strings.Builder
	if _, err := parseArgs([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "batch-tokens") {
		t.Errorf("-h: %v\n%s", err, help.String())
	}
}
