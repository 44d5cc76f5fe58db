package main

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
)

// A model folder whose weights hold NaN is refused with the tensor named,
// before any line is scored.
func TestScoreRefusesNonFiniteWeights(t *testing.T) {
	src := filepath.Join("..", "train", "testdata", "warmstart")
	m, err := model.Load(src, model.NewCPU(), model.LMHeadOutput)
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

// -config sets the flags the command line leaves unset; an unknown key or
// a bad value names the file and line.
func TestScoreConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "score.yaml")
	os.WriteFile(path, []byte("model: /models/qwen\nbatch_tokens: 1024\nskip-bad: true\n"), 0o644)
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	m := fs.String("model", "", "")
	bt := fs.Int("batch-tokens", 4096, "")
	sb := fs.Bool("skip-bad", false, "")
	fs.String("config", "", "")
	if err := fs.Parse([]string{"-model", "/mine"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if *m != "/mine" || *bt != 1024 || !*sb {
		t.Fatalf("model %q batch-tokens %d skip-bad %v, want /mine (command line wins), 1024, true", *m, *bt, *sb)
	}
	for body, want := range map[string]string{"batch_tokens: many\n": ":1: batch_tokens", "modle: x\n": `:1: unknown key "modle"`, "- a\n": "want a mapping"} {
		os.WriteFile(path, []byte(body), 0o644)
		fs := flag.NewFlagSet("score", flag.ContinueOnError)
		fs.Int("batch-tokens", 4096, "")
		if err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
