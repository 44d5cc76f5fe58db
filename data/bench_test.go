package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Benchmarks of the loaders, each beside the plain approach it replaces,
// measured in the same run (benchmarks/data.md has the figures):
//
//	StreamHotpotQA   vs UnmarshalHotpotQA  (json.Unmarshal of the whole array)
//	StreamMuSiQue    vs ScanMuSiQue        (bufio.Scanner + json.Unmarshal per line)
//	StreamParquet    vs TypedParquet       (parquet-go GenericReader into a struct)

const benchRecords = 20000

// hotpotRecord is the HotpotQA element the benchmarks write and the
// baseline decodes: the real fields, about 1.5 kB each with context.
type hotpotRecord struct {
	ID              string  `json:"_id"`
	Answer          string  `json:"answer"`
	Question        string  `json:"question"`
	SupportingFacts [][]any `json:"supporting_facts"`
	Context         [][]any `json:"context"`
	Type            string  `json:"type"`
	Level           string  `json:"level"`
}

func benchHotpot(i int) hotpotRecord {
	para := strings.Repeat("Some sentence about the entity in question, with a few more words. ", 4)
	return hotpotRecord{
		ID:              fmt.Sprintf("5a8b57f25542995d1e6f%04x", i),
		Answer:          "answer " + fmt.Sprint(i),
		Question:        fmt.Sprintf("Which of the two entities numbered %d came first?", i),
		SupportingFacts: [][]any{{"Title A", 0}, {"Title B", 1}},
		Context:         [][]any{{"Title A", []string{para, para}}, {"Title B", []string{para, para}}, {"Title C", []string{para}}},
		Type:            "bridge",
		Level:           "hard",
	}
}

// benchFile writes a benchmark input into the benchmark's temporary folder,
// before the timed loop.
func benchFile(b *testing.B, name string, write func(f *os.File) error) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

func hotpotFile(b *testing.B) string {
	return benchFile(b, "hotpot.json", func(f *os.File) error {
		recs := make([]hotpotRecord, benchRecords)
		for i := range recs {
			recs[i] = benchHotpot(i)
		}
		return json.NewEncoder(f).Encode(recs)
	})
}

func musiqueFile(b *testing.B) string {
	return benchFile(b, "musique.jsonl", func(f *os.File) error {
		w := bufio.NewWriter(f)
		for i := range benchRecords {
			line, _ := json.Marshal(map[string]any{
				"id": fmt.Sprintf("2hop__%d_%d", i, i+1), "question": fmt.Sprintf("Who is the spouse of performer %d?", i),
				"answer": "someone", "answer_aliases": []string{"some one"}, "answerable": true,
				"question_decomposition": []map[string]any{{"id": i, "question": "x >> performer", "answer": "p", "paragraph_support_idx": 1}},
				"paragraphs":             []map[string]any{{"idx": 0, "title": "T", "paragraph_text": strings.Repeat("text ", 200), "is_supporting": true}},
			})
			w.Write(line)
			w.WriteByte('\n')
		}
		return w.Flush()
	})
}

func parquetFile(b *testing.B) string {
	return benchFile(b, "searchr1.parquet", func(f *os.File) error {
		samples := make([]Sample, benchRecords)
		for i := range samples {
			samples[i] = Sample{ID: fmt.Sprintf("nq:train_%d", i), DataSource: "nq", Question: fmt.Sprintf("question number %d about something?", i), Answers: []string{"an answer", "another"}}
		}
		return WriteParquet(f, samples, ParquetLayout{Style: StyleSearchR1})
	})
}

func setFileBytes(b *testing.B, path string) {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
}

func benchStream(b *testing.B, path string) {
	setFileBytes(b, path)
	for b.Loop() {
		n := 0
		if _, err := Stream(path, LoadOptions{}, func(Sample) error { n++; return nil }); err != nil || n != benchRecords {
			b.Fatalf("%d samples, %v", n, err)
		}
	}
}

func BenchmarkStreamHotpotQA(b *testing.B) { benchStream(b, hotpotFile(b)) }
func BenchmarkStreamMuSiQue(b *testing.B)  { benchStream(b, musiqueFile(b)) }
func BenchmarkStreamParquet(b *testing.B)  { benchStream(b, parquetFile(b)) }

func BenchmarkUnmarshalHotpotQA(b *testing.B) {
	path := hotpotFile(b)
	setFileBytes(b, path)
	for b.Loop() {
		raw, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		var recs []hotpotRecord
		if err := json.Unmarshal(raw, &recs); err != nil || len(recs) != benchRecords {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanMuSiQue(b *testing.B) {
	path := musiqueFile(b)
	setFileBytes(b, path)
	type rec struct {
		ID       string   `json:"id"`
		Question string   `json:"question"`
		Answer   string   `json:"answer"`
		Aliases  []string `json:"answer_aliases"`
	}
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		n := 0
		for sc.Scan() {
			var r rec
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				b.Fatal(err)
			}
			n++
		}
		f.Close()
		if n != benchRecords {
			b.Fatal(n)
		}
	}
}

func BenchmarkTypedParquet(b *testing.B) {
	path := parquetFile(b)
	setFileBytes(b, path)
	type message struct {
		Role    string `parquet:"role,optional"`
		Content string `parquet:"content,optional"`
	}
	type row struct {
		ID         string    `parquet:"id,optional"`
		Question   string    `parquet:"question,optional"`
		DataSource string    `parquet:"data_source,optional"`
		Golden     []string  `parquet:"golden_answers,list,optional"`
		Prompt     []message `parquet:"prompt,list,optional"`
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			b.Fatal(err)
		}
		r := parquet.NewGenericReader[row](f)
		buf := make([]row, parquetBatch)
		n := 0
		for {
			k, err := r.Read(buf)
			n += k
			if err != nil {
				break
			}
		}
		r.Close()
		if n != benchRecords {
			b.Fatal(n)
		}
	}
}
