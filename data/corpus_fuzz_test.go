package data

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// FuzzCorpusReader feeds arbitrary bytes to the reader: it must never panic,
// must end, and every error must be a *CorpusError naming a line in range.
func FuzzCorpusReader(f *testing.F) {
	for _, name := range []string{"corpus_wiki18.jsonl", "corpus_kilt.jsonl", "corpus_kilt_source.jsonl", "corpus_malformed.jsonl"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b, false)
	}
	f.Add([]byte("{\"id\":\"1\",\"contents\":\"\\ud800\"}\n{"), true)
	f.Add([]byte("\n\n\r\n{}"), true)
	f.Fuzz(func(t *testing.T, in []byte, skip bool) {
		lines := strings.Count(string(in), "\n") + 1
		r := NewCorpusReader(strings.NewReader(string(in)), "fuzz", CorpusOptions{SkipMalformed: skip, MaxLineBytes: 4096})
		for i := 0; ; i++ {
			if i > len(in)*2+10 {
				t.Fatal("reader does not end")
			}
			p, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var ce *CorpusError
				if !errors.As(err, &ce) || ce.Line < 1 || ce.Line > lines {
					t.Fatalf("error %v (line out of 1..%d or not a CorpusError)", err, lines)
				}
				if skip && !errors.Is(err, ErrLineTooLong) {
					t.Fatalf("skip mode returned %v", err)
				}
				break
			}
			if p.ID == "" {
				t.Fatalf("passage without id: %+v", p)
			}
		}
		n, reps := r.Skipped()
		if n < len(reps) || (!skip && n != 0) {
			t.Fatalf("skip count %d with %d reports", n, len(reps))
		}
	})
}
