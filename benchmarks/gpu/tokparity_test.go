package gpu

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/r1go/r1go/model/tokenizer"
)

// tokFixtureDir is where tokenizer_parity.py writes; R1GO_TOK_FIXTURES overrides.
func tokFixtureDir() string {
	if d := os.Getenv("R1GO_TOK_FIXTURES"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "model", "tokenizer", "testdata", "hf")
}

// tokGolden is one line of qwen2_bpe.golden.jsonl.gz.
type tokGolden struct {
	IDs      []int  `json:"ids"`
	Ordinary []int  `json:"ordinary"` // absent when equal to IDs
	Text     string `json:"text"`
	Skip     string `json:"skip"`
}

// readJSONLines decodes every line of a gzipped JSONL file into a T.
func readJSONLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var out []T
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// TestTokenizerParityHF loads the byte-level BPE that Hugging Face
// tokenizers trained (tokenizer_parity.py) with r1go's loader and checks,
// for every string of the hard-string corpus, Encode, EncodeOrdinary,
// DecodeText and DecodeText of the ids without special tokens against the
// Rust library's own output.
func TestTokenizerParityHF(t *testing.T) {
	root := tokFixtureDir()
	golden := filepath.Join(root, "qwen2_bpe.golden.jsonl.gz")
	if _, err := os.Stat(golden); err != nil {
		t.Skipf("no Hugging Face tokenizers fixture at %s: make it with benchmarks/gpu/tokenizer_parity.py "+
			"where tokenizers is installed (the GPU machine; benchmarks/gpu/README.md)", golden)
	}
	tok, err := tokenizer.Load(filepath.Join(root, "qwen2_bpe"))
	if err != nil {
		t.Fatal(err)
	}
	corpus := readJSONLines[string](t, filepath.Join("..", "..", "model", "tokenizer", "testdata", "golden", "strings.jsonl.gz"))
	want := readJSONLines[tokGolden](t, golden)
	if len(want) != len(corpus) {
		t.Fatalf("%s has %d lines for %d corpus strings; regenerate it", golden, len(want), len(corpus))
	}
	bad := 0
	report := func(i int, what string, got, exp any) {
		bad++
		if bad <= 10 {
			t.Errorf("string %d %q: %s = %v, Hugging Face tokenizers gives %v", i, corpus[i], what, got, exp)
		}
	}
	ids := 0
	for i, s := range corpus {
		w := want[i]
		got := tok.Encode(s)
		ids += len(got)
		if !slices.Equal(got, w.IDs) {
			report(i, "Encode", got, w.IDs)
			continue
		}
		wantOrd := w.Ordinary
		if wantOrd == nil {
			wantOrd = w.IDs
		}
		if ord := tok.EncodeOrdinary(s); !slices.Equal(ord, wantOrd) {
			report(i, "EncodeOrdinary", ord, wantOrd)
		}
		if txt := tok.DecodeText(got); txt != w.Text {
			report(i, "DecodeText", txt, w.Text)
		}
		if txt := tok.DecodeText(tok.StripSpecial(got)); txt != w.Skip {
			report(i, "DecodeText(StripSpecial)", txt, w.Skip)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d checks differ from Hugging Face tokenizers", bad, 4*len(corpus))
	}
	t.Logf("%d strings, %d ids: all equal to Hugging Face tokenizers", len(corpus), ids)
}
