package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model/safetensors"
)

// TestScoreMatchesPyTorch scores the golden fixture's sequences through the
// command and compares with PyTorch's logprob and entropy.
func TestScoreMatchesPyTorch(t *testing.T) {
	golden := filepath.Join("..", "..", "model", "testdata", "golden")
	raw, err := os.ReadFile(filepath.Join(golden, "qwen2_tied.inputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Tokens  []int32 `json:"tokens"`
		SeqLens []int   `json:"seq_lens"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	var lines []string
	off := 0
	for _, n := range in.SeqLens {
		if n >= 2 {
			b, _ := json.Marshal(map[string]any{"tokens": in.Tokens[off : off+n]})
			lines = append(lines, string(b))
		}
		off += n
	}
	os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	output := filepath.Join(dir, "out.jsonl")
	// A small batch limit forces several packed batches.
	if err := run(filepath.Join(golden, "qwen2_tied"), filepath.Join(golden, "qwen2_tied"), input, output, 8, false); err != nil {
		t.Fatal(err)
	}
	gf, err := safetensors.Open(filepath.Join(golden, "qwen2_tied.golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	want := make([]float32, len(in.Tokens))
	if err := gf.ReadF32("logprob", want); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(output)
	defer f.Close()
	sc := bufio.NewScanner(f)
	off, got := 0, 0
	for _, n := range in.SeqLens {
		if n < 2 {
			off += n
			continue
		}
		if !sc.Scan() {
			t.Fatal("missing output line")
		}
		var o outputLine
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatal(err)
		}
		if len(o.LogProb) != n-1 {
			t.Fatalf("line %d: %d logprobs for %d tokens", o.Line, len(o.LogProb), n)
		}
		for i, v := range o.LogProb {
			if w := want[off+i]; math.Abs(float64(v-w)) > 1e-4*math.Max(1, math.Abs(float64(w))) {
				t.Fatalf("line %d token %d: logprob %v, PyTorch %v", o.Line, i, v, w)
			}
		}
		off += n
		got++
	}
	if got != len(lines) {
		t.Fatalf("%d output lines for %d inputs", got, len(lines))
	}
}

func TestScoreBadLines(t *testing.T) {
	model := filepath.Join("..", "..", "model", "testdata", "golden", "qwen2_tied")
	for _, tc := range []struct{ line, want string }{
		{`{"tokens": [1, 2`, "in.jsonl:2: malformed JSON"},
		{`{"tokens": []}`, "no tokens"},
		{`{"tokens": [1, 4000]}`, "outside the vocabulary"},
		{`{"foo": 1}`, "neither"},
		{`{"text": "hi"}`, "need a tokenizer.json"},
	} {
		dir := t.TempDir()
		input := filepath.Join(dir, "in.jsonl")
		os.WriteFile(input, []byte(`{"tokens": [1, 2, 3]}`+"\n"+tc.line+"\n"), 0o644)
		err := run(model, model, input, filepath.Join(dir, "out.jsonl"), 64, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("line %s: error %v, want one containing %q", tc.line, err, tc.want)
		}
		// Under -skip-bad the good line is still scored.
		if err := run(model, model, input, filepath.Join(dir, "out.jsonl"), 64, true); err != nil {
			t.Errorf("skip-bad: %v", err)
		}
		out, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		if strings.Count(string(out), "\n") != 1 {
			t.Errorf("skip-bad wrote %q, want the one good line", out)
		}
	}
}

// TestScoreOneTokenLine scores every golden sequence, the one-token one
// included: that line gets empty logprob and entropy lists, and every
// line's next_entropy is PyTorch's entropy after its last token.
func TestScoreOneTokenLine(t *testing.T) {
	golden := filepath.Join("..", "..", "model", "testdata", "golden")
	raw, err := os.ReadFile(filepath.Join(golden, "qwen2_tied.inputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Tokens  []int32 `json:"tokens"`
		SeqLens []int   `json:"seq_lens"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var lines []string
	off := 0
	for _, n := range in.SeqLens {
		b, _ := json.Marshal(map[string]any{"tokens": in.Tokens[off : off+n]})
		lines = append(lines, string(b))
		off += n
	}
	input, output := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	if err := run(filepath.Join(golden, "qwen2_tied"), filepath.Join(golden, "qwen2_tied"), input, output, 64, false); err != nil {
		t.Fatal(err)
	}
	gf, err := safetensors.Open(filepath.Join(golden, "qwen2_tied.golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	ent := make([]float32, len(in.Tokens))
	if err := gf.ReadF32("entropy", ent); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(output)
	rows := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(rows) != len(in.SeqLens) {
		t.Fatalf("%d output lines for %d inputs", len(rows), len(in.SeqLens))
	}
	off, ones := 0, 0
	for i, n := range in.SeqLens {
		var o struct {
			LogProb     []float32 `json:"logprob"`
			Entropy     []float32 `json:"entropy"`
			NextEntropy *float32  `json:"next_entropy"`
		}
		if err := json.Unmarshal([]byte(rows[i]), &o); err != nil {
			t.Fatal(err)
		}
		if o.LogProb == nil || o.Entropy == nil || len(o.LogProb) != n-1 || len(o.Entropy) != n-1 {
			t.Fatalf("line %d (%d tokens): %s", i+1, n, rows[i])
		}
		w := ent[off+n-1]
		if o.NextEntropy == nil || math.Abs(float64(*o.NextEntropy-w)) > 1e-4*math.Max(1, math.Abs(float64(w))) {
			t.Fatalf("line %d: next_entropy %v, PyTorch %v", i+1, o.NextEntropy, w)
		}
		if n == 1 {
			ones++
		}
		off += n
	}
	if ones == 0 {
		t.Fatal("the fixture has no one-token line")
	}
}

// TestScoreDryRun plans from config.json alone, for a GPU that is absent.
func TestScoreDryRun(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen3-4b.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	var log strings.Builder
	d := devsel.Config{Device: "cuda", DeviceMemory: "1GiB", DryRun: true}
	if err := runOn(d, &log, dir, dir, "-", "-", 4096, false); err != nil {
		t.Fatal(err)
	}
	// 1 GiB holds not even Qwen3-4B's weights: no -batch-tokens helps.
	for _, s := range []string{"memory plan: qwen3", "on cuda", "does NOT fit", "no value of -batch-tokens makes it fit"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("plan lacks %q:\n%s", s, log.String())
		}
	}
}
