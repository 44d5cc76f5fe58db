package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func addFileSeeds(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(filepath.Join("testdata", p))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// checkReport holds for any input: nothing is lost (each record is a sample
// or a listed skip), and every problem names the stream and a line inside
// the input.
func checkReport(t *testing.T, in []byte, rep Report, err error, samples int) {
	t.Helper()
	lines := bytes.Count(in, []byte("\n")) + 1
	if err == nil && rep.Records != rep.Samples+len(rep.Skipped) {
		t.Fatalf("%d records, %d samples, %d skipped", rep.Records, rep.Samples, len(rep.Skipped))
	}
	if rep.Samples != samples {
		t.Fatalf("report says %d samples, callback saw %d", rep.Samples, samples)
	}
	errs := append([]*LoadError(nil), rep.Skipped...)
	var le *LoadError
	if errors.As(err, &le) {
		errs = append(errs, le)
	} else if err != nil {
		t.Fatalf("error %v is no LoadError", err)
	}
	for _, e := range errs {
		if e.File != "fuzz" || e.Line < 0 || e.Line > lines || !strings.HasPrefix(e.Error(), "data: fuzz") {
			t.Fatalf("problem %v: file %q line %d of %d", e, e.File, e.Line, lines)
		}
	}
}

func FuzzJSONArray(f *testing.F) {
	addFileSeeds(f, "*.json")
	f.Add([]byte(`[{"_id": "a", "question": "q", "answer": "x"}, {"_id": "b", "question": "\"]}", "answer": "y"}]`))
	f.Add([]byte(`[1, "s", null, {}, [], {"_id": 1}]`))
	f.Add([]byte("[\n{\"_id\": \"a\\\\\", \"question\": \"q\"}\n]"))
	f.Fuzz(fuzzArray)
}

func fuzzArray(t *testing.T, in []byte) {
	n := 0
	rep, err := StreamReader(bytes.NewReader(in), "fuzz", LoadOptions{Format: FormatHotpotQA, SkipMalformed: true, MaxRecordBytes: 1 << 16},
		func(Sample) error { n++; return nil })
	checkReport(t, in, rep, err, n)
	// Differential check against encoding/json: a valid array of small
	// elements scans without a structural error into exactly its elements.
	var elems []json.RawMessage
	trimmed := bytes.TrimPrefix(in, []byte("\xef\xbb\xbf"))
	if json.Unmarshal(trimmed, &elems) == nil && len(bytes.TrimSpace(trimmed)) > 0 && bytes.TrimSpace(trimmed)[0] == '[' && len(trimmed) < 1<<16 {
		if err != nil || rep.Records != len(elems) {
			t.Fatalf("valid array of %d elements: %d records, %v", len(elems), rep.Records, err)
		}
	}
}

func FuzzJSONL(f *testing.F) {
	addFileSeeds(f, "*.jsonl", "flashrag/*/*.jsonl")
	f.Add([]byte("{\"id\": \"1\", \"question\": \"q\", \"golden_answers\": [\"a\"]}\r\n\n{\"id\": 2}\n"))
	f.Add([]byte(`{"id": "x", "question": "q", "answer": "a", "answer_aliases": [1, "b"], "answerable": true}`))
	f.Add([]byte("{\"id\": \"x\", \"question\": \"q\xff\", \"answer\": \"a\\u00e9\"}"))
	f.Fuzz(fuzzLines)
}

func fuzzLines(t *testing.T, in []byte) {
	n := 0
	rep, err := StreamReader(bytes.NewReader(in), "fuzz", LoadOptions{Format: FormatMuSiQue, SkipMalformed: true, MaxRecordBytes: 1 << 16},
		func(Sample) error { n++; return nil })
	checkReport(t, in, rep, err, n)
	// The fast path for plain strings agrees with encoding/json.
	for _, line := range bytes.Split(in, []byte("\n")) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(line, &fields) != nil {
			continue
		}
		for _, raw := range fields {
			var want string
			if got, ok := plainString(raw); ok && (json.Unmarshal(raw, &want) != nil || got != want) {
				t.Fatalf("plainString(%q) = %q, encoding/json says %q", raw, got, want)
			}
		}
	}
	// Auto-detected, every good sample has an id, a question and an
	// answer.
	n = 0
	rep, err = StreamReader(bytes.NewReader(in), "fuzz", LoadOptions{DataSource: "nq", SkipMalformed: true}, func(s Sample) error {
		if s.ID == "" || s.Question == "" || len(s.Answers) == 0 {
			t.Fatalf("incomplete sample %+v", s)
		}
		n++
		return nil
	})
	checkReport(t, in, rep, err, n)
}

func FuzzParquet(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.parquet")
	strict, _ := filepath.Glob("testdata/strict/strict_*.parquet")
	files = append(files, strict...)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)*3/4])
		damaged := bytes.Clone(b)
		damaged[len(b)/3] ^= 0xff
		f.Add(damaged)
	}
	f.Fuzz(fuzzParquet)
}

func fuzzParquet(t *testing.T, in []byte) {
	n := 0
	rep, err := streamParquet(bytes.NewReader(in), int64(len(in)), "fuzz", LoadOptions{SkipMalformed: true}, func(Sample) error { n++; return nil })
	if rep.Samples != n {
		t.Fatalf("report says %d samples, callback saw %d", rep.Samples, n)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "data: fuzz") {
		t.Fatalf("error %q does not name the file", err)
	}
}

// The Go fuzzing engine stalls on the development machine (even on a
// trivial target), so the fuzz bodies also run here over deterministic
// random mutations of the fixtures: byte flips, cuts, and inserted JSON
// punctuation, a few at a time.
func TestMutatedInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
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
	for _, tc := range []struct {
		glob string
		body func(*testing.T, []byte)
		runs int
	}{
		{"*.json", fuzzArray, 600},
		{"*.jsonl", fuzzLines, 600},
		{"*.parquet", fuzzParquet, 300},
	} {
		files, _ := filepath.Glob(filepath.Join("testdata", tc.glob))
		var seeds [][]byte
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, b)
		}
		for range tc.runs {
			tc.body(t, mutate(seeds[rng.IntN(len(seeds))]))
		}
	}
}
