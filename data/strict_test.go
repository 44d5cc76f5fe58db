package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Real-format files that used to go silently through.

func TestParquetStringPromptIsAnError(t *testing.T) {
	path := "testdata/strict/strict_prompt_string.parquet"
	_, _, err := Load(path, LoadOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.File != path || le.Row != 1 || le.Field != "prompt" || !strings.Contains(err.Error(), "is a string") || !strings.Contains(err.Error(), "data.prompt_json") {
		t.Fatalf("error %v, want one naming %s row 1 column prompt", err, path)
	}
	// Opted in, the JSON text is parsed into messages.
	got, _, err := Load(path, LoadOptions{PromptJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[1].Prompt) != 1 || got[1].Prompt[0].Role != "user" || got[1].Question != "who founded Roche?" || got[1].Answers[0] != "Fritz Hoffmann-La Roche" {
		t.Errorf("got %+v", got)
	}
	// Opted in, text that is not a message list is still an error.
	if _, err := rowPrompt("You are a helpful assistant.", true); err == nil || err.field != "prompt" || !strings.Contains(err.err.Error(), "not a JSON list") {
		t.Errorf("plain text with prompt_json: %v", err)
	}
	if _, err := rowPrompt(`[{"role": "user"}]`, true); err == nil || err.field != "prompt[0].content" {
		t.Errorf("message without content: %v", err)
	}
}

func TestParquetNullGroundTruth(t *testing.T) {
	path := "testdata/strict/strict_null_truth.parquet"
	_, _, err := Load(path, LoadOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.Row != 2 || le.Field != "reward_model.ground_truth" || !strings.Contains(err.Error(), "null") {
		t.Fatalf("error %v, want a null ground_truth on row 2", err)
	}
	// Skip mode: row 2 skipped, counted and named.
	got, rep, err := Load(path, LoadOptions{SkipMalformed: true, MaxSkipFraction: 0.5})
	if err != nil || len(got) != 2 || len(rep.Skipped) != 1 || rep.Skipped[0].Row != 2 {
		t.Fatalf("skip: %d samples, %v, %v", len(got), rep.Skipped, err)
	}
	line := SkipSummary([]Report{rep}, 5)
	if SkippedCount([]Report{rep}) != 1 || !strings.Contains(line, "skipped 1 bad record") || !strings.Contains(line, path+": 1 of 3") || !strings.Contains(line, "row 2") {
		t.Errorf("summary %q", line)
	}
	// Asked for, golden_answers stands in for the null ground truth only.
	got, _, err = Load(path, LoadOptions{AnswerColumn: "golden_answers"})
	if err != nil || len(got) != 3 || got[1].Answers[0] != "Antarctica" || got[0].Answers[0] != "Fritz Hoffmann-La Roche" {
		t.Fatalf("answer column: %+v, %v", got, err)
	}
}

func TestOnBadRecordAndZeroSamples(t *testing.T) {
	for s, want := range map[string]bool{"": false, "error": false, "skip": true, " Skip ": true} {
		if got, err := ParseOnBadRecord(s); err != nil || got != want {
			t.Errorf("%q: %v, %v", s, got, err)
		}
	}
	if _, err := ParseOnBadRecord("drop"); err == nil || !strings.Contains(err.Error(), "data.on_bad_record") {
		t.Errorf("drop: %v", err)
	}
	// Files without a record: zero samples is an error naming them.
	path := filepath.Join(t.TempDir(), "hotpot_dev.json")
	if err := os.WriteFile(path, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, reps, err := LoadFiles([]string{path}, LoadOptions{SkipMalformed: true})
	if !errors.Is(err, ErrNoSamples) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "0 records read") || SkippedCount(reps) != 0 {
		t.Errorf("error %v", err)
	}
}

func TestFormatSniffedByContent(t *testing.T) {
	dir := t.TempDir()
	jsonl := []byte(`{"id": "1", "question": "q", "golden_answers": ["a"]}` + "\n")
	// A ".parquet" holding JSONL is not a parquet file, never read as JSON.
	p := filepath.Join(dir, "train.parquet")
	os.WriteFile(p, jsonl, 0o644)
	if _, _, err := Load(p, LoadOptions{DataSource: "nq"}); err == nil || !strings.Contains(err.Error(), "not a parquet file") {
		t.Errorf(".parquet with JSON: %v", err)
	}
	// A parquet file under any name is parquet.
	good, _ := os.ReadFile("testdata/searchr1_element.parquet")
	p = filepath.Join(dir, "train.jsonl")
	os.WriteFile(p, good, 0o644)
	if got, rep, err := Load(p, LoadOptions{}); err != nil || rep.Format != FormatParquet || len(got) != 4 {
		t.Errorf("parquet named .jsonl: %d, %v, %v", len(got), rep.Format, err)
	}
	// Gzip under a plain name is decompressed; JSON under ".gz" is JSON.
	gz, _ := os.ReadFile("testdata/corpus_wiki18.jsonl.gz")
	p = filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(p, gz, 0o644)
	if ps, _, err := ReadCorpus(p, CorpusOptions{}); err != nil || len(ps) == 0 {
		t.Errorf("gzip corpus named .jsonl: %d, %v", len(ps), err)
	}
	p = filepath.Join(dir, "nq-dev.jsonl.gz")
	os.WriteFile(p, jsonl, 0o644)
	if got, _, err := Load(p, LoadOptions{}); err != nil || len(got) != 1 || got[0].DataSource != "nq" {
		t.Errorf("plain JSONL named .gz: %+v, %v", got, err)
	}
}

func TestFlashRAGSource(t *testing.T) {
	dir := t.TempDir()
	line := []byte(`{"id": "1", "question": "q", "golden_answers": ["a"]}` + "\n")
	for name, want := range map[string]string{"popqa_test.jsonl": "popqa", "2wikimultihopqa-dev.jsonl": "2wikimultihopqa", "bamboogle.jsonl": "bamboogle"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, line, 0o644)
		got, _, err := Load(p, LoadOptions{})
		if err != nil || got[0].DataSource != want || got[0].ID != want+":1" {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
	// Per-file source from the config beats the name.
	p := filepath.Join(dir, "popqa_test.jsonl")
	got, _, err := Load(p, LoadOptions{DataSource: "nq", DataSources: map[string]string{"popqa_test.jsonl": "triviaqa"}})
	if err != nil || got[0].DataSource != "triviaqa" {
		t.Errorf("per-file: %+v, %v", got, err)
	}
	// Nothing names the source: the error names the config key...
	p = filepath.Join(dir, "mine.jsonl")
	os.WriteFile(p, line, 0o644)
	if _, _, err := Load(p, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "data.data_source") || strings.Contains(err.Error(), "LoadOptions") {
		t.Errorf("no source: %v", err)
	}
	// ...but a broken first line is reported as itself, not hidden by it.
	os.WriteFile(p, []byte(`{"id": "1", "question": "q", "golden_answers": "a"}`+"\n"), 0o644)
	var le *LoadError
	if _, _, err := Load(p, LoadOptions{}); !errors.As(err, &le) || le.Line != 1 || le.Field != "golden_answers" {
		t.Errorf("broken line: %v", err)
	}
}

func TestCorpusKILTAndParquet(t *testing.T) {
	// corag/kilt-corpus rows carry wikipedia_id: KILT, not the knowledge
	// source, and the id is kept.
	row := `{"id": "7", "title": "Lake Vostok", "contents": "Lake Vostok\nIt lies under Vostok Station.", "wikipedia_id": "5001"}` + "\n"
	cr := NewCorpusReader(strings.NewReader(row), "mem", CorpusOptions{})
	p, err := cr.Next()
	if err != nil || cr.Layout() != LayoutKILT || p.ID != "7" || p.WikipediaID != "5001" || p.Text() != "It lies under Vostok Station." {
		t.Fatalf("kilt row: %+v, %s, %v", p, cr.Layout(), err)
	}
	// The knowledge source keeps its article id on every paragraph.
	ps, _, err := ReadCorpus("testdata/corpus_kilt_source.jsonl", CorpusOptions{})
	if err != nil || len(ps) == 0 || ps[0].WikipediaID != "5000" || !strings.HasPrefix(ps[0].ID, "5000-") {
		t.Fatalf("kilt source: %+v, %v", ps, err)
	}
	// Parquet corpora: KILT's columns, and DPR's id/title/text.
	ps, _, err = ReadCorpus("testdata/strict/corpus_kilt.parquet", CorpusOptions{})
	if err != nil || len(ps) != 2 || ps[1] != (Passage{ID: "1001", Title: "Lake Vostok", Contents: "Lake Vostok\nLake Vostok is the largest of Antarctica's subglacial lakes.", WikipediaID: "5001"}) {
		t.Fatalf("kilt parquet: %+v, %v", ps, err)
	}
	ps, _, err = ReadCorpus("testdata/strict/corpus_dpr.parquet", CorpusOptions{})
	if err != nil || len(ps) != 2 || ps[0].ID != "1" || ps[0].Contents != "Aaron\nAaron is a prophet, high priest, and the brother of Moses." || ps[0].Text() != "Aaron is a prophet, high priest, and the brother of Moses." {
		t.Fatalf("dpr parquet: %+v, %v", ps, err)
	}
	// A dataset is not a corpus: the missing column is named.
	if _, err := OpenCorpus("testdata/searchr1_element.parquet", CorpusOptions{}); err == nil || !strings.Contains(err.Error(), "neither a contents nor a text column") {
		t.Errorf("dataset as corpus: %v", err)
	}
	// JSONL under a .parquet name is refused.
	p2 := filepath.Join(t.TempDir(), "c.parquet")
	os.WriteFile(p2, []byte(row), 0o644)
	if _, err := OpenCorpus(p2, CorpusOptions{}); err == nil || !strings.Contains(err.Error(), "not a parquet file") {
		t.Errorf("json .parquet corpus: %v", err)
	}
}
