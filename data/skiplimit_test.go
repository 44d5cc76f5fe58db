package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Skip mode drops a few bad records among good ones; a file it would
// empty, or thin past data.max_skip_fraction, stops the load naming the
// file, the count and the first record's reason.

func TestSkipModeRefusesAFileWithNoGoodRecord(t *testing.T) {
	good := "testdata/searchr1_element.parquet"
	for _, tc := range []struct {
		path, count, reason string
	}{
		// The prompt saved as JSON text (pandas' to_parquet of json.dumps).
		{"testdata/strict/strict_prompt_string.parquet", "2 of 2", `row 1: field "prompt": is a string`},
		// reward_model dropped by the preprocessing, golden_answers kept.
		{"testdata/strict/strict_no_reward_model.parquet", "10 of 10", `row 1: field "reward_model": missing (set data.answer_column`},
	} {
		// Beside a good file, and even with every share allowed: the bad
		// file alone gives nothing, which is never what was meant.
		got, reps, err := LoadFiles([]string{good, tc.path}, LoadOptions{SkipMalformed: true, MaxSkipFraction: 1})
		if !errors.Is(err, ErrTooManySkipped) {
			t.Fatalf("%s beside %s: %d samples, error %v; want ErrTooManySkipped", tc.path, good, len(got), err)
		}
		msg := err.Error()
		for _, want := range []string{tc.path, tc.count, tc.reason, "data.on_bad_record=skip"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
		if len(reps) != 2 || reps[1].File != tc.path || reps[1].Samples != 0 {
			t.Errorf("reports %+v", reps)
		}
		// Alone, the same.
		if _, _, err := LoadFiles([]string{tc.path}, LoadOptions{SkipMalformed: true}); !errors.Is(err, ErrTooManySkipped) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s alone: error %v, want one giving the first reason", tc.path, err)
		}
		if _, _, err := Load(tc.path, LoadOptions{SkipMalformed: true, MaxSkipFraction: 1}); !errors.Is(err, ErrTooManySkipped) {
			t.Errorf("Load %s: error %v", tc.path, err)
		}
	}
}

// flashRAG writes a FlashRAG JSONL file of n records, the records at the
// indexes in bad without a gold answer.
func flashRAG(t *testing.T, n int, bad ...int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		answers := fmt.Sprintf(`["answer %d"]`, i)
		for _, j := range bad {
			if j == i {
				answers = "[]"
			}
		}
		fmt.Fprintf(&b, `{"id": "test_%d", "question": "question %d?", "golden_answers": %s}`+"\n", i, i, answers)
	}
	path := filepath.Join(t.TempDir(), "nq_test.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMaxSkipFraction(t *testing.T) {
	skip := LoadOptions{SkipMalformed: true}
	// One bad record in ten is the default's limit: loaded.
	got, reps, err := LoadFiles([]string{flashRAG(t, 10, 3)}, skip)
	if err != nil || len(got) != 9 || SkippedCount(reps) != 1 {
		t.Fatalf("1 of 10 bad: %d samples, %v", len(got), err)
	}
	// Two in ten are over it: refused, naming the share, the key and the
	// first bad record's line.
	path := flashRAG(t, 10, 4, 7)
	_, _, err = LoadFiles([]string{path}, skip)
	if !errors.Is(err, ErrTooManySkipped) {
		t.Fatalf("2 of 10 bad: error %v, want ErrTooManySkipped", err)
	}
	for _, want := range []string{path, "2 of 10", "data.max_skip_fraction 0.1", `line 5: field "golden_answers"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Raised, the same file loads.
	if got, _, err := LoadFiles([]string{path}, LoadOptions{SkipMalformed: true, MaxSkipFraction: 0.2}); err != nil || len(got) != 8 {
		t.Errorf("max 0.2: %d samples, %v", len(got), err)
	}
	// Search-R1's bad rows: 2 of 3 over the default, 1 sample under 1.
	if _, _, err := Load("testdata/searchr1_badrows.parquet", skip); !errors.Is(err, ErrTooManySkipped) || !strings.Contains(err.Error(), "2 of 3") {
		t.Errorf("badrows at the default: %v", err)
	}
	// Error mode never gets here: the first bad record stops the load.
	var le *LoadError
	if _, _, err := LoadFiles([]string{path}, LoadOptions{}); !errors.As(err, &le) || le.Line != 5 {
		t.Errorf("error mode: %v", err)
	}
}

func TestMaxSkipFractionSetting(t *testing.T) {
	s := DefaultSettings()
	if s.MaxSkipFraction != DefaultMaxSkipFraction || DefaultMaxSkipFraction != 0.1 {
		t.Fatalf("default max_skip_fraction %v", s.MaxSkipFraction)
	}
	s.OnBadRecord, s.MaxSkipFraction = "skip", 0.25
	if o, err := s.LoadOptions(); err != nil || o.MaxSkipFraction != 0.25 {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, v := range []float64{0, -0.1, 1.5} {
		s.MaxSkipFraction = v
		if _, err := s.LoadOptions(); err == nil || !strings.Contains(err.Error(), "data.max_skip_fraction") {
			t.Errorf("%v: error %v", v, err)
		}
	}
}
