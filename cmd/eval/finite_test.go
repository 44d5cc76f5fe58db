package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// eval refuses a model, or a -base model, whose weights hold Inf, naming
// the tensor, before it builds anything.
func TestEvalRefusesNonFiniteWeights(t *testing.T) {
	src := filepath.Join("..", "train", "testdata", "warmstart")
	m, err := model.Load(src, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]float32, m.NumParams())
	m.Dev.Download(host, m.Params)
	host[7] = float32(math.Inf(1)) // the embedding table
	m.Dev.Upload(m.Params, host)
	dir := filepath.Join(t.TempDir(), "inf")
	if err := m.Save(dir, nil, model.SaveOptions{DType: "float32", TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), defaultConfig(), dir, "", "", "", &out)
	if err == nil || !strings.Contains(err.Error(), "model.embed_tokens.weight") || !strings.Contains(err.Error(), "1 Inf") {
		t.Fatalf("eval of Inf weights: %v", err)
	}
}
