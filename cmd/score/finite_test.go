package main

import (
	"math"
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
