package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// want is what a test expects of one sample; the values are read off the
// fixture files by hand (testdata/make_dataset_fixtures.py, gen/main.go).
type sampleWant struct {
	id, source, question string
	answers              []string
	extra                map[string]string // a subset of Extra
}

func checkSamples(t *testing.T, got []Sample, wants []sampleWant) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("%d samples, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		s := got[i]
		if s.ID != w.id || s.DataSource != w.source || s.Question != w.question || !reflect.DeepEqual(s.Answers, w.answers) {
			t.Errorf("sample %d = {%q %q %q %q}, want {%q %q %q %q}", i, s.ID, s.DataSource, s.Question, s.Answers, w.id, w.source, w.question, w.answers)
		}
		for k, v := range w.extra {
			if s.Extra[k] != v {
				t.Errorf("sample %d Extra[%q] = %q, want %q", i, k, s.Extra[k], v)
			}
		}
	}
}

func TestLoadEveryFormat(t *testing.T) {
	searchR1 := []sampleWant{
		{"nq:train_0", "nq", "total number of death row inmates in the us", []string{"2,718"}, map[string]string{"ability": "fact-reasoning", "split": "train", "index": "0", "style": "rule"}},
		{"nq:train_1", "nq", "big little lies season 2 how many episodes", []string{"seven", "7"}, map[string]string{"index": "1"}},
		{"hotpotqa:train_0", "hotpotqa", "Which magazine was started first Arthur's Magazine or First for Women?", []string{"Arthur's Magazine"}, nil},
		{"hotpotqa:train_1", "hotpotqa", "The Oberoi family is part of a hotel company that has a head office in what city?", []string{"Delhi"}, nil},
	}
	agentR1 := []sampleWant{
		{"hotpotqa/hotpot_qa:5a7a06935542990198eaf050", "hotpotqa/hotpot_qa", "Which magazine was started first Arthur's Magazine or First for Women?", []string{"Arthur's Magazine"},
			map[string]string{"ability": "multihop_qa", "type": "comparison", "level": "medium", "supporting_facts": `{"title": ["Arthur's Magazine", "First for Women"], "sent_id": [0, 0]}`}},
		{"hotpotqa/hotpot_qa:5a879ab05542996e4f30887e", "hotpotqa/hotpot_qa", "The Oberoi family is part of a hotel company that has a head office in what city?", []string{"Delhi"}, map[string]string{"level": "hard"}},
	}
	for _, tc := range []struct {
		file   string
		opt    LoadOptions
		format Format
		wants  []sampleWant
	}{
		{"hotpotqa_dev.json", LoadOptions{}, FormatHotpotQA, []sampleWant{
			{"hotpotqa:5a8b57f25542995d1e6f1371", "hotpotqa", "Were Scott Derrickson and Ed Wood of the same nationality?", []string{"yes"},
				map[string]string{"type": "comparison", "level": "hard", "supporting_facts": `[["Scott Derrickson",0],["Ed Wood",0]]`}},
			{"hotpotqa:5a8c7595554299585d9e36b6", "hotpotqa", "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?", []string{"Chief of Protocol"}, map[string]string{"type": "bridge", "level": "medium"}},
			{"hotpotqa:5ab3b0bf5542992ade7c6e39", "hotpotqa", "In what neighborhood is the \u201cCaf\u00e9 Wha?\u201d located?", []string{"Greenwich Village, New York City"}, nil},
		}},
		{"2wikimultihopqa_dev.json", LoadOptions{}, Format2Wiki, []sampleWant{
			{"2wikimultihopqa:8813f87c0bdd11eba7f7acde48001122", "2wikimultihopqa", "Who is the director of film Polish-Russian War (Film)'s father?", []string{"Andrzej \u017bu\u0142awski"},
				map[string]string{"type": "compositional", "entity_ids": "Q7208285_Q8042048", "evidences": `[["Polish-Russian War","director","Xawery Żuławski"],["Xawery Żuławski","father","Andrzej Żuławski"]]`}},
			{"2wikimultihopqa:4bb3e3a40bdd11eba7f7acde48001122", "2wikimultihopqa", "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?", []string{"The Mask Of Fu Manchu"}, map[string]string{"type": "comparison", "answer_id": "Q1540120"}},
		}},
		{"2wikimultihopqa_test.json", LoadOptions{Format: Format2Wiki, AllowUnanswered: true}, Format2Wiki, []sampleWant{
			{"2wikimultihopqa:8813f87c0bdd11eba7f7acde48001122", "2wikimultihopqa", "Who is the director of film Polish-Russian War (Film)'s father?", nil, nil},
			{"2wikimultihopqa:4bb3e3a40bdd11eba7f7acde48001122", "2wikimultihopqa", "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?", nil, nil},
		}},
		{"musique_dev.jsonl", LoadOptions{}, FormatMuSiQue, []sampleWant{
			{"musique:2hop__460946_294723", "musique", "Who is the spouse of the Green performer?", []string{"Miquette Giraudy", "Miquette Giraudy-Hillage"}, map[string]string{"answerable": "true", "hops": "2"}},
			// "Canada" is both the answer and an alias: kept once.
			{"musique:3hop1__9285_5188_23307", "musique", "What is the country where the mountain range containing Mortimer is located?", []string{"Canada", "CA"}, map[string]string{"hops": "3"}},
		}},
		{"flashrag/hotpotqa/dev.jsonl", LoadOptions{}, FormatFlashRAG, []sampleWant{
			{"hotpotqa:dev_0", "hotpotqa", "Were Scott Derrickson and Ed Wood of the same nationality?", []string{"yes"},
				map[string]string{"metadata": `{"level":"hard","supporting_facts":{"sent_id":[0,0],"title":["Scott Derrickson","Ed Wood"]},"type":"comparison"}`}},
			// A number in golden_answers is kept as written.
			{"hotpotqa:dev_1", "hotpotqa", "How many copies of Roald Dahl's variation on a popular anecdote sold?", []string{"250 million", "250000000"}, nil},
		}},
		{"flashrag/nq/test.jsonl", LoadOptions{Format: FormatFlashRAG}, FormatFlashRAG, []sampleWant{
			{"nq:test_0", "nq", "who got the first nobel prize in physics", []string{"Wilhelm Conrad R\u00f6ntgen"}, nil},
			{"nq:test_1", "nq", "when is the next deadpool movie being released", []string{"May 18, 2018"}, nil},
		}},
		{"flashrag/nq/test.jsonl", LoadOptions{DataSource: "popqa"}, FormatFlashRAG, []sampleWant{
			{"popqa:test_0", "popqa", "who got the first nobel prize in physics", []string{"Wilhelm Conrad R\u00f6ntgen"}, nil},
			{"popqa:test_1", "popqa", "when is the next deadpool movie being released", []string{"May 18, 2018"}, nil},
		}},
		{"searchr1_element.parquet", LoadOptions{}, FormatParquet, searchR1},
		{"searchr1_item.parquet", LoadOptions{}, FormatParquet, searchR1},
		{"agentr1_element.parquet", LoadOptions{}, FormatParquet, agentR1},
		{"agentr1_item.parquet", LoadOptions{Format: FormatParquet}, FormatParquet, agentR1},
	} {
		t.Run(strings.ReplaceAll(tc.file, "/", "_"), func(t *testing.T) {
			got, rep, err := Load(filepath.Join("testdata", tc.file), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != tc.format || rep.Records != len(tc.wants) || rep.Samples != len(tc.wants) || len(rep.Skipped) != 0 {
				t.Errorf("report %+v, want format %s and %d clean records", rep, tc.format, len(tc.wants))
			}
			checkSamples(t, got, tc.wants)
		})
	}
}

func TestParquetPrompt(t *testing.T) {
	got, _, err := Load("testdata/searchr1_item.parquet", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Search-R1's base prompt, with "?" appended to the question.
	want0 := []Message{{Role: "user", Content: "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. You can search as many times as your want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: total number of death row inmates in the us?\n"}}
	if !reflect.DeepEqual(got[0].Prompt, want0) {
		t.Errorf("prompt 0 = %q", got[0].Prompt)
	}
	want3 := []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Question: The Oberoi family is part of a hotel company that has a head office in what city?\n"}}
	if !reflect.DeepEqual(got[3].Prompt, want3) {
		t.Errorf("prompt 3 = %q", got[3].Prompt)
	}
}

func TestQuestionFromPrompt(t *testing.T) {
	for _, tc := range []struct {
		msgs []Message
		want string
	}{
		{[]Message{{"user", SearchR1Prompt(" who wrote hamlet ")}}, "who wrote hamlet?"},
		{[]Message{{"user", AgentR1Prompt("Who wrote Hamlet?")}}, "Who wrote Hamlet?"},
		{[]Message{{"system", "Question: not this"}, {"user", "plain text question"}}, "plain text question"},
		{[]Message{{"user", "first Question: a\nQuestion: b"}}, "b"},
		{[]Message{{"assistant", "x"}}, ""},
		{nil, ""},
	} {
		if got := questionFromPrompt(tc.msgs); got != tc.want {
			t.Errorf("questionFromPrompt(%q) = %q, want %q", tc.msgs, got, tc.want)
		}
	}
}

// readDatasetExpect reads a "line<TAB>field" file written by the fixture script.
func readDatasetExpect(t *testing.T, name string) []LoadError {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []LoadError
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineStr, field, _ := strings.Cut(sc.Text(), "\t")
		line, err := strconv.Atoi(lineStr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, LoadError{Line: line, Field: field})
	}
	return out
}

func TestMalformedSkipped(t *testing.T) {
	for _, tc := range []struct {
		file, expect string
		goodIDs      []string
	}{
		{"hotpotqa_malformed.json", "hotpotqa_malformed.expect", []string{"hotpotqa:5a8b57f25542995d1e6f1371", "hotpotqa:5ab3b0bf5542992ade7c6e39"}},
		{"musique_malformed.jsonl", "musique_malformed.expect", []string{"musique:2hop__460946_294723", "musique:x-crlf", "musique:x-last"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			// Most records of these fixtures are bad: allowed explicitly.
			got, rep, err := Load(path, LoadOptions{SkipMalformed: true, MaxSkipFraction: 1})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if !reflect.DeepEqual(ids, tc.goodIDs) {
				t.Errorf("samples %v, want %v", ids, tc.goodIDs)
			}
			expect := readDatasetExpect(t, tc.expect)
			if len(rep.Skipped) != len(expect) {
				t.Fatalf("skipped %v, want %d", rep.Skipped, len(expect))
			}
			// Nothing lost: every record is either a sample or reported.
			if rep.Records != len(got)+len(rep.Skipped) || rep.Samples != len(got) {
				t.Errorf("report counts %d records, %d samples, %d skipped", rep.Records, rep.Samples, len(rep.Skipped))
			}
			for i, e := range expect {
				s := rep.Skipped[i]
				if s.File != path || s.Line != e.Line || s.Field != e.Field {
					t.Errorf("skipped %d: %s line %d field %q, want line %d field %q (%v)", i, s.File, s.Line, s.Field, e.Line, e.Field, s)
				}
				where := " line " + strconv.Itoa(e.Line)
				if strings.HasSuffix(path, ".json") {
					// One element per line after the "[" line.
					where += " (record " + strconv.Itoa(e.Line-1) + ")"
				}
				if !strings.HasPrefix(s.Error(), "data: "+path+where+": ") {
					t.Errorf("error text %q does not name file and line", s.Error())
				}
			}
		})
	}
}

func TestMalformedFailsFast(t *testing.T) {
	for _, tc := range []struct {
		file   string
		line   int
		field  string
		before int // samples delivered before the error
	}{
		{"hotpotqa_malformed.json", 3, "answer", 1},
		{"musique_malformed.jsonl", 3, "", 1},
	} {
		n := 0
		_, err := Stream(filepath.Join("testdata", tc.file), LoadOptions{}, func(Sample) error { n++; return nil })
		var le *LoadError
		if !errors.As(err, &le) || le.Line != tc.line || le.Field != tc.field {
			t.Errorf("%s: error %v, want a LoadError at line %d field %q", tc.file, err, tc.line, tc.field)
		}
		if n != tc.before {
			t.Errorf("%s: %d samples before the error, want %d", tc.file, n, tc.before)
		}
	}
}

// HotpotQA's files are one line: an element is found by its index.
func TestOneLineArrayNamesTheRecord(t *testing.T) {
	in := `[{"_id": "a", "question": "q", "answer": "x"}, {"_id": "b", "question": "q", "answer": "y"}, {"_id": "c", "question": "q"}]`
	_, err := StreamReader(strings.NewReader(in), "hotpot_train_v1.1.json", LoadOptions{}, func(Sample) error { return nil })
	if err == nil || err.Error() != `data: hotpot_train_v1.1.json line 1 (record 3): field "answer": missing` {
		t.Fatalf("error %v", err)
	}
}

func TestMissingAnswerIsNamed(t *testing.T) {
	_, err := Stream("testdata/2wikimultihopqa_test.json", LoadOptions{}, func(Sample) error { return nil })
	var le *LoadError
	if !errors.As(err, &le) || le.Field != "answer" || !errors.Is(err, ErrMissingField) || le.Line != 1 {
		t.Fatalf("error %v, want field answer missing on line 1", err)
	}
}

func TestParquetBadRows(t *testing.T) {
	path := "testdata/searchr1_badrows.parquet"
	_, err := Stream(path, LoadOptions{}, func(Sample) error { return nil })
	var le *LoadError
	if !errors.As(err, &le) || le.Row != 2 || le.Field != "data_source" || !errors.Is(err, ErrUnknownSource) || !strings.Contains(err.Error(), `"gsm8k"`) {
		t.Fatalf("error %v, want unknown data_source gsm8k on row 2", err)
	}
	if !strings.HasPrefix(err.Error(), "data: "+path+" row 2: field \"data_source\"") {
		t.Errorf("error text %q", err)
	}

	got, rep, err := Load(path, LoadOptions{SkipMalformed: true, MaxSkipFraction: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkSamples(t, got, []sampleWant{{"nq:ok", "nq", "who wrote the song photograph by ringo starr", []string{"Ringo Starr", "George Harrison"}, map[string]string{"split": "test"}}})
	if len(rep.Skipped) != 2 || rep.Skipped[0].Row != 2 || rep.Skipped[1].Row != 3 || rep.Skipped[1].Field != "reward_model.ground_truth.target" {
		t.Fatalf("skipped %v", rep.Skipped)
	}

	// gsm8k accepted by name, the unanswered row kept on request.
	got, rep, err = Load(path, LoadOptions{ExtraSources: []string{"gsm8k"}, AllowUnanswered: true})
	if err != nil || len(got) != 3 || got[1].ID != "gsm8k:1" || got[2].Answers != nil || len(rep.Skipped) != 0 {
		t.Fatalf("got %d samples, %v, %v", len(got), rep.Skipped, err)
	}
}

func TestBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("testdata/searchr1_element.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		content []byte
		opt     LoadOptions
		want    string
	}{
		{"empty.json", nil, LoadOptions{}, "empty file"},
		{"spaces.jsonl", []byte("\n  \n"), LoadOptions{}, "empty file"},
		{"cut.json", []byte(`[{"_id": "a", "question": "q", "answer": "x"}, {"_id": "b",`), LoadOptions{}, "line 1 (record 2): the array element that starts here is cut off"},
		{"noclose.json", []byte(`[{"_id": "a", "question": "q", "answer": "x"}` + "\n"), LoadOptions{}, "line 2: the JSON array ends without its closing ']'"},
		{"sep.json", []byte("[{\"_id\": \"a\", \"question\": \"q\", \"answer\": \"x\"}\n{\"_id\": \"b\"}]"), LoadOptions{}, "line 2: want ',' or ']' between array elements"},
		{"trail.json", []byte(`[{"_id": "a", "question": "q", "answer": "x"}] x`), LoadOptions{}, `'x' after the closing ']'`},
		{"unknown.jsonl", []byte(`{"q": 1}`), LoadOptions{}, "cannot tell the dataset format from the fields [q]"},
		{"flash.jsonl", []byte(`{"id": "1", "question": "q", "golden_answers": ["a"]}`), LoadOptions{}, "set data.data_source"},
		{"source.jsonl", []byte(`{"id": "1", "question": "q", "golden_answers": ["a"]}`), LoadOptions{DataSource: "mystery"}, `unknown data_source "mystery"`},
		{"array.jsonl", []byte(`[{"id": "1"}]`), LoadOptions{Format: FormatFlashRAG}, "holds a JSON array, but format flashrag is JSONL"},
		{"lines.json", []byte(`{"_id": "1"}`), LoadOptions{Format: FormatHotpotQA}, "format hotpotqa is one JSON array"},
		{"cut.parquet", good[:len(good)-10], LoadOptions{}, "not a readable parquet file"},
		{"cut2.parquet", good[:len(good)/2], LoadOptions{Format: FormatParquet}, "not a readable parquet file"},
		{"bad.json.gz", []byte{0x1f, 0x8b, 8, 0}, LoadOptions{}, "gzip"},
		{"csv.json", []byte("[]"), LoadOptions{Format: "csv"}, `unknown dataset format "csv"`},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, tc.content, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(path, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "data: ") {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestGzipAndStop(t *testing.T) {
	raw, err := os.ReadFile("testdata/musique_dev.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	path := filepath.Join(t.TempDir(), "musique.jsonl.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := Load(path, LoadOptions{})
	if err != nil || len(got) != 2 || got[1].ID != "musique:3hop1__9285_5188_23307" {
		t.Fatalf("gzip load: %d samples, %v", len(got), err)
	}
	n := 0
	rep, err := Stream(path, LoadOptions{}, func(Sample) error { n++; return ErrStop })
	if err != nil || n != 1 || rep.Samples != 1 {
		t.Fatalf("ErrStop: %d samples, report %+v, %v", n, rep, err)
	}
	boom := errors.New("boom")
	if _, err := Stream("testdata/searchr1_element.parquet", LoadOptions{}, func(Sample) error { return boom }); err != boom {
		t.Fatalf("callback error came back as %v", err)
	}
}

func TestRecordTooLarge(t *testing.T) {
	opt := LoadOptions{SkipMalformed: true, MaxRecordBytes: 300}
	for _, file := range []string{"musique_dev.jsonl", "hotpotqa_dev.json"} {
		got, rep, err := Load(filepath.Join("testdata", file), opt)
		if !errors.Is(err, ErrTooManySkipped) || !strings.Contains(err.Error(), "record longer than") {
			t.Fatalf("%s: error %v, want no usable record", file, err)
		}
		// Every record of these fixtures is longer than 300 bytes: each is
		// reported, none delivered, and the scan resyncs.
		if len(got) != 0 || rep.Records != len(rep.Skipped) || rep.Records < 2 {
			t.Fatalf("%s: %d samples, %d records, %d skipped", file, len(got), rep.Records, len(rep.Skipped))
		}
		for _, e := range rep.Skipped {
			if !errors.Is(e, ErrRecordTooLarge) {
				t.Fatalf("%s: %v", file, e)
			}
		}
	}
	// The limit leaves a short record alone.
	in := `[{"_id": "a", "question": "q", "answer": "x"}, {"_id": "b", "question": "` + strings.Repeat("long ", 100) + `", "answer": "y"}, {"_id": "c", "question": "q", "answer": "z"}]`
	var ids []string
	rep, err := StreamReader(strings.NewReader(in), "mem", opt, func(s Sample) error { ids = append(ids, s.ID); return nil })
	if err != nil || !reflect.DeepEqual(ids, []string{"hotpotqa:a", "hotpotqa:c"}) || len(rep.Skipped) != 1 {
		t.Fatalf("ids %v, skipped %v, %v", ids, rep.Skipped, err)
	}
}

func TestLoadFilesRejectsDuplicates(t *testing.T) {
	paths := []string{"testdata/musique_dev.jsonl", "testdata/musique_dev.jsonl"}
	if _, _, err := LoadFiles(paths, LoadOptions{}); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("error %v, want a duplicate id", err)
	}
	// Skip mode drops duplicates, but a file made only of them (the same
	// file listed twice) holds nothing new: refused, naming the cause.
	got, reps, err := LoadFiles(append(paths, "testdata/hotpotqa_dev.json"), LoadOptions{SkipMalformed: true})
	if !errors.Is(err, ErrTooManySkipped) || !strings.Contains(err.Error(), "duplicate id") || len(got) != 2 || len(reps) != 2 || len(reps[1].Skipped) != 2 || reps[1].Samples != 0 {
		t.Fatalf("%d samples, reports %+v, %v", len(got), reps, err)
	}
	// One duplicate among good records is dropped and counted.
	dir := t.TempDir()
	extra := filepath.Join(dir, "more.jsonl")
	line, err := os.ReadFile("testdata/musique_dev.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(line), "\n")
	var b strings.Builder
	b.WriteString(first + "\n")
	for i := range 9 {
		fmt.Fprintf(&b, `{"id": "more_%d", "question": "q%d?", "answer": "a", "answer_aliases": [], "answerable": true, "paragraphs": [], "question_decomposition": []}`+"\n", i, i)
	}
	if err := os.WriteFile(extra, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got, reps, err = LoadFiles([]string{paths[0], extra}, LoadOptions{SkipMalformed: true})
	if err != nil || len(got) != 11 || len(reps[1].Skipped) != 1 || !errors.Is(reps[1].Skipped[0], ErrDuplicateID) {
		t.Fatalf("%d samples, reports %+v, %v", len(got), reps, err)
	}
}

func TestParseFormatAndSources(t *testing.T) {
	for in, want := range map[string]Format{"": FormatAuto, "auto": FormatAuto, "HotpotQA": FormatHotpotQA, "2wiki": Format2Wiki, " parquet ": FormatParquet} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("csv"); err == nil {
		t.Error("ParseFormat(csv) gave no error")
	}
	for name, want := range map[string]string{"hotpotqa/hotpot_qa": "hotpotqa", "xanhho/2WikiMultihopQA": "2wikimultihopqa", "bdsaglam/musique": "musique", "nq": "nq", "synthetic": "synthetic"} {
		if got, ok := CanonicalSource(name); !ok || got != want {
			t.Errorf("CanonicalSource(%q) = %q, %v", name, got, ok)
		}
	}
	if _, ok := CanonicalSource("gsm8k"); ok {
		t.Error("gsm8k is known")
	}
	defer func() {
		if recover() == nil {
			t.Error("RegisterSource of a known name did not panic")
		}
	}()
	RegisterSource("nq", "nq")
}
