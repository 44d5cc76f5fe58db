package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTrainByHand checks the trainer on a corpus whose merges are counted
// by hand. Pieces (Qwen2 pattern): "ab" x3, " ab" x2, "abc" x1.
// Pair counts: (a,b) 6, (" ",a) 2, (b,c) 1 -> merge "a b".
// Then (" ",ab) 2, (ab,c) 1 -> merge "Ġ ab". Then only (ab,c) 1 < 2: stop.
func TestTrainByHand(t *testing.T) {
	tok, err := Train([]string{"ab ab ab", "abc"}, 1000, TrainOptions{MergesAsStrings: true, AddedTokens: []AddedToken{{Content: "<eos>", Special: true}}, EOSToken: "<eos>"})
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges []string       `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(tok.fileJSON, &file); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a b", "Ġ ab"}; !slices.Equal(file.Model.Merges, want) {
		t.Errorf("merges %q, want %q", file.Model.Merges, want)
	}
	if file.Model.Vocab["!"] != 0 || file.Model.Vocab["ab"] != 256 || file.Model.Vocab["Ġab"] != 257 || len(file.Model.Vocab) != 258 {
		t.Errorf("vocab: ! %d, ab %d, Ġab %d, size %d", file.Model.Vocab["!"], file.Model.Vocab["ab"], file.Model.Vocab["Ġab"], len(file.Model.Vocab))
	}
	if eos, ok := tok.EOS(); !ok || eos != 258 || tok.VocabSize() != 259 {
		t.Errorf("EOS %d %v, VocabSize %d", eos, ok, tok.VocabSize())
	}
	// "c" is byte 0x63, id 0x63-0x21 = 66 in the printable-first order.
	if got, want := tok.Encode("ab abc<eos>"), []int{256, 257, 66, 258}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

// TestSaveLoad: a trained tokenizer saved and loaded again encodes the
// same, and a loaded folder saves its files byte for byte.
func TestSaveLoad(t *testing.T) {
	corpus := readGolden[string](t, "strings.jsonl.gz")[:500]
	tok, err := Train(corpus, 600, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range corpus {
		if !slices.Equal(tok.Encode(s), back.Encode(s)) {
			t.Fatalf("%q encodes differently after Save/Load", s)
		}
	}
	if _, source := back.ChatTemplate(); source != filepath.Join(dir, "chat_template.jinja") {
		t.Errorf("template source %q", source)
	}
	again := t.TempDir()
	if err := back.Save(again); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, _ := os.ReadFile(filepath.Join(again, name))
		if string(a) != string(b) || len(a) == 0 {
			t.Errorf("%s changed on a second Save (%d vs %d bytes)", name, len(a), len(b))
		}
	}
}

// TestTrainDeterministic: map iteration order must not leak into the file.
func TestTrainDeterministic(t *testing.T) {
	corpus := readGolden[string](t, "strings.jsonl.gz")[:800]
	a, err := Train(corpus, 700, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, err := Train(corpus, 700, TrainOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(a.fileJSON) != string(b.fileJSON) {
			t.Fatal("two trainings on the same corpus differ")
		}
	}
	if bytes.Equal(a.fileJSON, nil) || a.VocabSize() != 722 {
		t.Errorf("VocabSize %d, want 700 + 22 added", a.VocabSize())
	}
}
