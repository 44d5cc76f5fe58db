package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzPromptJSON: a string prompt under data.prompt_json never panics,
// and a parsed prompt has one message per element of the JSON list.
func FuzzPromptJSON(f *testing.F) {
	for _, s := range []string{`[{"role": "user", "content": "q"}]`, `[{"role": "user"}]`, `[]`, `{"role": "user"}`, `[null]`, `[{"role": 1, "content": "x"}]`, "plain text", `[{"role":"system","content":"\u00e9"},{"role":"user","content":""}]`} {
		f.Add(s)
	}
	f.Fuzz(fuzzPromptJSON)
}

func fuzzPromptJSON(t *testing.T, s string) {
	msgs, ferr := rowPrompt(s, true)
	if ferr != nil {
		if !strings.HasPrefix(ferr.field, "prompt") {
			t.Fatalf("error on field %q", ferr.field)
		}
		return
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(s), &list); err != nil || len(list) != len(msgs) {
		t.Fatalf("%q parsed into %d messages, the JSON list has %d (%v)", s, len(msgs), len(list), err)
	}
	if _, ferr := rowPrompt(s, false); ferr == nil || ferr.field != "prompt" {
		t.Fatal("a string prompt without prompt_json was accepted")
	}
}

// FuzzParquetCorpus: a damaged parquet corpus ends with an error naming
// the file, never a panic or a passage without an id.
func FuzzParquetCorpus(f *testing.F) {
	for _, name := range []string{"strict/corpus_kilt.parquet", "strict/corpus_dpr.parquet", "searchr1_item.parquet"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b[:len(b)*3/4], true)
		d := bytes.Clone(b)
		d[len(b)/2] ^= 0xff
		f.Add(d, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, skip bool) { fuzzParquetCorpus(t, in, skip) })
}

// fuzzParquetCorpus returns how many passages came out.
func fuzzParquetCorpus(t *testing.T, in []byte, skip bool) (n int) {
	cr, err := newParquetCorpus(bytes.NewReader(in), int64(len(in)), nil, "fuzz", CorpusOptions{SkipMalformed: skip})
	if err != nil {
		if !strings.HasPrefix(err.Error(), "data: corpus fuzz") {
			t.Fatalf("error %q does not name the file", err)
		}
		return 0
	}
	defer cr.Close()
	for i := 0; ; i++ {
		if i > len(in)+10 {
			t.Fatal("reader does not end")
		}
		p, err := cr.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			var ce *CorpusError
			if !strings.HasPrefix(err.Error(), "data: corpus fuzz") || (skip && errors.As(err, &ce)) {
				t.Fatalf("error %v (skip %v)", err, skip)
			}
			return n
		}
		if p.ID == "" {
			t.Fatalf("passage without id: %+v", p)
		}
		n++
	}
}

// Seeded mutations of the same bodies, for machines where the fuzzing
// engine stalls (see TestMutatedInputs).
func TestMutatedStrictInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	mutate := func(seed []byte) []byte {
		in := bytes.Clone(seed)
		for range 1 + rng.IntN(4) {
			switch p := rng.IntN(len(in) + 1); rng.IntN(4) {
			case 0:
				if p < len(in) {
					in[p] = byte(rng.IntN(256))
				}
			case 1:
				in = in[:p]
			case 2:
				in = slices.Insert(in, p, "[]{}\"\\\n,:0"[rng.IntN(10)])
			case 3:
				if p < len(in) {
					in = slices.Delete(in, p, min(len(in), p+1+rng.IntN(8)))
				}
			}
		}
		return in
	}
	prompt := []byte(`[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Question: q?\n"}]`)
	for range 2000 {
		fuzzPromptJSON(t, string(mutate(prompt)))
	}
	for _, name := range []string{"strict/corpus_kilt.parquet", "strict/corpus_dpr.parquet"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		read := 0
		for i := range 1500 {
			if fuzzParquetCorpus(t, mutate(b), i%2 == 0) > 0 {
				read++
			}
		}
		// The mutations must reach the row decoder, not only the footer
		// check, or the test proves little.
		t.Logf("%s: %d of 1500 mutations still gave passages", name, read)
		if read == 0 {
			t.Errorf("%s: no mutation got past the footer", name)
		}
	}
}
