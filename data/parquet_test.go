package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The footers of the committed fixtures, written out by hand from the
// pyarrow layout formats.md §3.7 describes: optional columns, 3-level LISTs
// with a repeated group "list" and an optional element named "element"
// (pyarrow >= 13) or "item" (older), strings as annotated binary, the
// extra_info index as int64.
const searchR1Schema = `message schema {
	optional binary id (STRING);
	optional binary question (STRING);
	optional group golden_answers (LIST) {
		repeated group list {
			optional binary ELEM (STRING);
		}
	}
	optional binary data_source (STRING);
	optional group prompt (LIST) {
		repeated group list {
			optional group ELEM {
				optional binary role (STRING);
				optional binary content (STRING);
			}
		}
	}
	optional binary ability (STRING);
	optional group reward_model {
		optional binary style (STRING);
		optional group ground_truth {
			optional group target (LIST) {
				repeated group list {
					optional binary ELEM (STRING);
				}
			}
		}
	}
	optional group extra_info {
		optional binary split (STRING);
		optional int64 index (INT(64,true));
	}
}`

const agentR1Schema = `message schema {
	optional binary id (STRING);
	optional binary question (STRING);
	optional binary level (STRING);
	optional binary supporting_facts (STRING);
	optional binary type (STRING);
	optional binary data_source (STRING);
	optional group prompt (LIST) {
		repeated group list {
			optional group ELEM {
				optional binary role (STRING);
				optional binary content (STRING);
			}
		}
	}
	optional binary ability (STRING);
	optional group reward_model {
		optional binary style (STRING);
		optional binary ground_truth (STRING);
	}
}`

func openParquet(t *testing.T, path string) *parquet.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParquetPhysicalSchema(t *testing.T) {
	for _, tc := range []struct {
		file, schema, elem string
		columns            []string
	}{
		{"searchr1_element.parquet", searchR1Schema, "element", []string{"id", "question", "golden_answers", "data_source", "prompt", "ability", "reward_model", "extra_info"}},
		{"searchr1_item.parquet", searchR1Schema, "item", nil},
		{"agentr1_element.parquet", agentR1Schema, "element", []string{"id", "question", "level", "supporting_facts", "type", "data_source", "prompt", "ability", "reward_model"}},
		{"agentr1_item.parquet", agentR1Schema, "item", nil},
	} {
		f := openParquet(t, filepath.Join("testdata", tc.file))
		want := strings.ReplaceAll(tc.schema, "ELEM", tc.elem)
		if got := f.Schema().String(); got != want {
			t.Errorf("%s schema:\n%s\nwant:\n%s", tc.file, got, want)
		}
		// The LIST groups carry both the logical and the converted
		// annotation, as pyarrow writes them.
		for _, el := range f.Metadata().Schema {
			if _, isList := el.LogicalType.Value.(*format.ListType); isList && (!el.ConvertedType.Valid || el.ConvertedType.V != 3 /* LIST */) {
				t.Errorf("%s: LIST group %s has no LIST converted type", tc.file, el.Name)
			}
		}
		for _, rg := range f.Metadata().RowGroups {
			for _, c := range rg.Columns {
				if c.MetaData.Codec != format.Snappy {
					t.Errorf("%s column %v: codec %v, want SNAPPY", tc.file, c.MetaData.PathInSchema, c.MetaData.Codec)
				}
			}
		}
		meta, ok := f.Lookup("huggingface")
		if !ok {
			t.Fatalf("%s: no huggingface metadata", tc.file)
		}
		var hf struct {
			Info struct {
				Features json.RawMessage `json:"features"`
			} `json:"info"`
		}
		if err := json.Unmarshal([]byte(meta), &hf); err != nil {
			t.Fatalf("%s: huggingface metadata: %v", tc.file, err)
		}
		if tc.columns != nil {
			if got := jsonKeys(t, hf.Info.Features); !reflect.DeepEqual(got, tc.columns) {
				t.Errorf("%s: features %v, want %v", tc.file, got, tc.columns)
			}
		}
	}
}

// jsonKeys lists an object's keys in file order.
func jsonKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// The committed fixture is what the generator writes today: read it, strip
// what the loader adds, write it again, compare bytes.
func TestParquetFixtureIsCurrent(t *testing.T) {
	path := filepath.Join("testdata", "searchr1_element.parquet")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].Extra = nil
		if got[i].ID != "hotpotqa:train_1" { // the one row with its own prompt
			got[i].Prompt = nil
		}
	}
	var buf bytes.Buffer
	if err := WriteParquet(&buf, got, ParquetLayout{Style: StyleSearchR1}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from what WriteParquet writes now: rerun go run ./data/testdata/gen and testdata/check_parquet_footer.py", path)
	}
}

// describeFooter renders a footer as check_parquet_footer.py does, from
// parquet-go's reading of it.
func describeFooter(md *format.FileMetaData) []string {
	physical := map[format.Type]string{format.Boolean: "boolean", format.Int32: "int32", format.Int64: "int64", format.ByteArray: "binary"}
	repetition := map[format.FieldRepetitionType]string{format.Required: "required", format.Optional: "optional", format.Repeated: "repeated"}
	converted := map[int32]string{0: "UTF8", 3: "LIST", 18: "INT_64"}
	var lines []string
	pos := 0
	var walk func(depth int)
	walk = func(depth int) {
		e := md.Schema[pos]
		pos++
		rep := "root"
		if e.RepetitionType.Valid {
			rep = repetition[e.RepetitionType.V]
		}
		kind := "group"
		if e.Type.Valid {
			kind = physical[e.Type.V]
		}
		parts := []string{rep, kind, e.Name}
		if e.ConvertedType.Valid {
			parts = append(parts, "converted="+converted[int32(e.ConvertedType.V)])
		}
		switch lt := e.LogicalType.Value.(type) {
		case *format.StringType:
			parts = append(parts, "logical=STRING")
		case *format.ListType:
			parts = append(parts, "logical=LIST")
		case *format.IntType:
			sign := "unsigned"
			if lt.IsSigned {
				sign = "signed"
			}
			parts = append(parts, "logical=INTEGER("+strconv.Itoa(int(lt.BitWidth))+","+sign+")")
		}
		lines = append(lines, strings.Repeat("  ", depth)+strings.Join(parts, " "))
		if e.NumChildren.Valid {
			for range e.NumChildren.V {
				walk(depth + 1)
			}
		}
	}
	walk(0)
	for _, rg := range md.RowGroups {
		for _, c := range rg.Columns {
			codec := map[format.CompressionCodec]string{format.Uncompressed: "UNCOMPRESSED", format.Snappy: "SNAPPY"}[c.MetaData.Codec]
			lines = append(lines, "column "+strings.Join(c.MetaData.PathInSchema, ".")+" codec="+codec)
		}
	}
	for _, kv := range md.KeyValueMetadata {
		lines = append(lines, "kv "+kv.Key)
	}
	return append(lines, "rows "+strconv.FormatInt(md.NumRows, 10))
}

// The footers as parquet-go reads them agree with the independent Thrift
// decoder of check_parquet_footer.py, which also asserted the §3.7 shape.
func TestParquetFootersMatchPython(t *testing.T) {
	ref, err := os.ReadFile("testdata/parquet_footers.txt")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*.parquet")
	var got []string
	for _, path := range files {
		got = append(got, "== "+filepath.Base(path))
		got = append(got, describeFooter(openParquet(t, path).Metadata())...)
	}
	if want := strings.TrimSuffix(string(ref), "\n"); strings.Join(got, "\n") != want {
		t.Errorf("parquet-go reads the footers as\n%s\n\nPython read\n%s", strings.Join(got, "\n"), want)
	}
}

func TestWriteParquetRoundTrip(t *testing.T) {
	samples := []Sample{
		{ID: "synthetic:test-0", DataSource: "synthetic", Question: "Who is the founder of Tazomir?", Answers: []string{"Belovan"}, Extra: map[string]string{"hops": "2"}},
		{ID: "synthetic:test-1", DataSource: "synthetic", Question: "What is the birthplace of \u00c5sa?", Answers: []string{"K\u00f6ln", "Cologne"}},
	}
	for _, layout := range []ParquetLayout{{Style: StyleSearchR1}, {Style: StyleSearchR1, ListItem: true}, {Style: StyleAgentR1}, {Style: StyleAgentR1, ListItem: true}} {
		path := filepath.Join(t.TempDir(), "x.parquet")
		var buf bytes.Buffer
		if err := WriteParquet(&buf, samples, layout); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _, err := Load(path, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			wantAnswers := s.Answers
			if layout.Style == StyleAgentR1 {
				wantAnswers = s.Answers[:1] // a plain-string ground truth holds one answer
			}
			if got[i].ID != s.ID || got[i].Question != s.Question || !reflect.DeepEqual(got[i].Answers, wantAnswers) {
				t.Errorf("%+v: sample %d came back as %+v", layout, i, got[i])
			}
		}
		if layout.Style == StyleAgentR1 && got[0].Extra["hops"] != "2" {
			t.Errorf("%+v: leftover column hops = %q", layout, got[0].Extra["hops"])
		}
	}
	if err := WriteParquet(&bytes.Buffer{}, samples, ParquetLayout{Style: "verl"}); err == nil {
		t.Error("unknown style gave no error")
	}
}

func TestDecodeParquetRowErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"data_source":  "nq",
			"prompt":       []any{map[string]any{"role": "user", "content": "Question: q?\n"}},
			"reward_model": map[string]any{"style": "rule", "ground_truth": map[string]any{"target": []any{"a"}}},
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(map[string]any)
		field string
	}{
		{"no source", func(r map[string]any) { delete(r, "data_source") }, "data_source"},
		{"source type", func(r map[string]any) { r["data_source"] = int64(3) }, "data_source"},
		{"unknown source", func(r map[string]any) { r["data_source"] = "gsm8k" }, "data_source"},
		{"prompt type", func(r map[string]any) { r["prompt"] = int64(1) }, "prompt"},
		{"message type", func(r map[string]any) { r["prompt"] = []any{"hi"} }, "prompt[0]"},
		{"role type", func(r map[string]any) { r["prompt"] = []any{map[string]any{"role": nil, "content": "x"}} }, "prompt[0].role"},
		{"content type", func(r map[string]any) {
			r["prompt"] = []any{map[string]any{"role": "user", "content": int64(2)}}
		}, "prompt[0].content"},
		{"no question", func(r map[string]any) { delete(r, "prompt") }, "question"},
		{"no user message", func(r map[string]any) { r["prompt"] = []any{map[string]any{"role": "system", "content": "x"}} }, "prompt"},
		{"reward_model type", func(r map[string]any) { r["reward_model"] = "rule" }, "reward_model"},
		{"target null", func(r map[string]any) {
			r["reward_model"] = map[string]any{"ground_truth": map[string]any{"target": nil}}
		}, "reward_model.ground_truth.target"},
		{"target item", func(r map[string]any) {
			r["reward_model"] = map[string]any{"ground_truth": map[string]any{"target": []any{"a", true}}}
		}, "reward_model.ground_truth.target[1]"},
		{"ground_truth type", func(r map[string]any) { r["reward_model"] = map[string]any{"ground_truth": true} }, "reward_model.ground_truth"},
		{"no answers at all", func(r map[string]any) { delete(r, "reward_model") }, "reward_model"},
		{"ground_truth null", func(r map[string]any) { r["reward_model"] = map[string]any{"style": "rule", "ground_truth": nil} }, "reward_model.ground_truth"},
		{"answer column ignored", func(r map[string]any) { delete(r, "reward_model"); r["golden_answers"] = []any{"a"} }, "reward_model"},
		{"id type", func(r map[string]any) { r["id"] = 1.5 }, "id"},
		{"aliases type", func(r map[string]any) { delete(r, "reward_model"); r["answer"] = "a"; r["answer_aliases"] = int64(1) }, "answer_aliases"},
	} {
		row := base()
		tc.edit(row)
		opt := LoadOptions{}
		if tc.name == "aliases type" {
			opt.AnswerColumn = "answer" // the fallback only when asked for
		}
		_, err := decodeParquetRow(row, 7, opt)
		if err == nil || err.field != tc.field {
			t.Errorf("%s: error %v, want one on field %q", tc.name, err, tc.field)
		}
	}
	// The good base row, and the fallbacks: a string ground truth, a list,
	// golden_answers or answer when data.answer_column names them, an id
	// from extra_info.index or the row number.
	for _, tc := range []struct {
		edit    func(map[string]any)
		col     string
		id      string
		answers []string
	}{
		{func(map[string]any) {}, "", "nq:row7", []string{"a"}},
		{func(r map[string]any) { r["reward_model"] = map[string]any{"ground_truth": "b"}; r["id"] = int64(12) }, "", "nq:12", []string{"b"}},
		{func(r map[string]any) { r["reward_model"] = map[string]any{"ground_truth": []any{"c", "d", "c"}} }, "", "nq:row7", []string{"c", "d"}},
		{func(r map[string]any) {
			delete(r, "reward_model")
			r["answer"] = "Canada"
			r["answer_aliases"] = []any{"CA", "Canada"}
		}, "answer", "nq:row7", []string{"Canada", "CA"}},
		{func(r map[string]any) {
			r["reward_model"] = map[string]any{"style": "rule", "ground_truth": nil}
			r["golden_answers"] = []any{"e", int64(5)}
			r["extra_info"] = map[string]any{"index": int64(40), "split": "test"}
		}, "golden_answers", "nq:40", []string{"e", "5"}},
	} {
		row := base()
		tc.edit(row)
		s, err := decodeParquetRow(row, 7, LoadOptions{AnswerColumn: tc.col})
		if err != nil || s.ID != tc.id || !reflect.DeepEqual(s.Answers, tc.answers) || s.Question != "q?" {
			t.Errorf("row %v: sample %+v, %v; want id %s answers %v", row, s, err, tc.id, tc.answers)
		}
	}
}

func TestParquetMissingColumns(t *testing.T) {
	type onlyAnswers struct {
		Answer string `parquet:"answer"`
	}
	type noSource struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
	}
	dir := t.TempDir()
	write := func(name string, rows any) string {
		path := filepath.Join(dir, name)
		var buf bytes.Buffer
		switch r := rows.(type) {
		case []onlyAnswers:
			if err := parquet.Write(&buf, r); err != nil {
				t.Fatal(err)
			}
		case []noSource:
			if err := parquet.Write(&buf, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, _, err := Load(write("a.parquet", []onlyAnswers{{"x"}}), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "neither a prompt nor a question column") {
		t.Errorf("error %v", err)
	}
	path := write("b.parquet", []noSource{{"Who?", "Me"}})
	_, _, err = Load(path, LoadOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.Field != "data_source" {
		t.Errorf("error %v, want a missing data_source column", err)
	}
	// With the source and the answer column given, a plain HF-style file
	// loads; without the answer column it is refused (no reward_model).
	if _, _, err := Load(path, LoadOptions{DataSource: "hotpotqa"}); err == nil || !strings.Contains(err.Error(), "row 1: field \"reward_model\": missing (set data.answer_column") {
		t.Errorf("no reward_model: error %v", err)
	}
	if _, _, err := Load(path, LoadOptions{DataSource: "hotpotqa", AnswerColumn: "answers"}); err == nil || !strings.Contains(err.Error(), `"answers": no such column`) {
		t.Errorf("absent answer column: error %v", err)
	}
	got, _, err := Load(path, LoadOptions{DataSource: "hotpotqa", AnswerColumn: "answer"})
	if err != nil || len(got) != 1 || got[0].ID != "hotpotqa:row1" || got[0].Answers[0] != "Me" {
		t.Errorf("got %+v, %v", got, err)
	}
}

// The Hugging Face hotpot_qa parquet re-encodes the JSON as struct columns
// (formats.md §3.1); with the source named it loads like the JSON.
func TestParquetHuggingFaceHotpotQA(t *testing.T) {
	type facts struct {
		Title  []string `parquet:"title,list"`
		SentID []int32  `parquet:"sent_id,list"`
	}
	type context struct {
		Title     []string   `parquet:"title,list"`
		Sentences [][]string `parquet:"sentences,list"`
	}
	type row struct {
		ID              string  `parquet:"id"`
		Question        string  `parquet:"question"`
		Answer          string  `parquet:"answer"`
		Type            string  `parquet:"type"`
		Level           string  `parquet:"level"`
		SupportingFacts facts   `parquet:"supporting_facts"`
		Context         context `parquet:"context"`
	}
	var buf bytes.Buffer
	rows := []row{{
		ID: "5a8b57f25542995d1e6f1371", Question: "Were Scott Derrickson and Ed Wood of the same nationality?", Answer: "yes", Type: "comparison", Level: "hard",
		SupportingFacts: facts{Title: []string{"Scott Derrickson", "Ed Wood"}, SentID: []int32{0, 0}},
		Context:         context{Title: []string{"Ed Wood"}, Sentences: [][]string{{"Edward Davis Wood Jr. was an American filmmaker."}}},
	}}
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "validation.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := Load(path, LoadOptions{DataSource: "hotpotqa", AnswerColumn: "answer"})
	if err != nil {
		t.Fatal(err)
	}
	checkSamples(t, got, []sampleWant{{"hotpotqa:5a8b57f25542995d1e6f1371", "hotpotqa", "Were Scott Derrickson and Ed Wood of the same nationality?", []string{"yes"},
		map[string]string{"type": "comparison", "level": "hard", "supporting_facts": `{"sent_id":[0,0],"title":["Scott Derrickson","Ed Wood"]}`}}})
	if _, ok := got[0].Extra["context"]; ok {
		t.Error("the context paragraphs were kept")
	}
}

// hyparquet, a JavaScript reader sharing no code with parquet-go, read the
// fixtures into testdata/parquet_rows_hyparquet.json (testdata/hyparquet/
// dump.mjs); parquet-go must see the same cells.
func TestParquetRowsMatchHyparquet(t *testing.T) {
	raw, err := os.ReadFile("testdata/parquet_rows_hyparquet.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*.parquet")
	if len(files) != len(ref) {
		t.Fatalf("%d fixtures, hyparquet read %d", len(files), len(ref))
	}
	for _, path := range files {
		r := parquet.NewGenericReader[any](openParquet(t, path))
		rows := make([]any, 100)
		n, err := r.Read(rows)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		// Through JSON, so both sides hold float64 numbers and []any lists.
		b, err := json.Marshal(rows[:n])
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if want := ref[filepath.Base(path)]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parquet-go reads\n%s\nhyparquet read\n%v", path, b, want)
		}
	}
}

// A file of many row groups streams in order, and row numbers in errors
// count across groups.
func TestParquetManyRowGroups(t *testing.T) {
	samples := make([]Sample, 1000)
	for i := range samples {
		samples[i] = Sample{ID: "nq:" + strconv.Itoa(i), DataSource: "nq", Question: "question " + strconv.Itoa(i), Answers: []string{"a" + strconv.Itoa(i)}}
	}
	samples[733].DataSource = "unknown-source"
	var buf bytes.Buffer
	if err := WriteParquet(&buf, samples, ParquetLayout{Style: StyleSearchR1, RowGroupRows: 100}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "groups.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(openParquet(t, path).RowGroups()); n != 10 {
		t.Fatalf("%d row groups, want 10", n)
	}
	got, rep, err := Load(path, LoadOptions{SkipMalformed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 999 || len(rep.Skipped) != 1 || rep.Skipped[0].Row != 734 {
		t.Fatalf("%d samples, skipped %v", len(got), rep.Skipped)
	}
	for i, s := range got {
		j := i
		if i >= 733 {
			j++
		}
		if s.ID != "nq:"+strconv.Itoa(j) || s.Answers[0] != "a"+strconv.Itoa(j) {
			t.Fatalf("sample %d is %+v, want row %d", i, s, j)
		}
	}
}

// Old parquet-mr writers store lists in two levels, with no LIST
// annotation: repeated group prompt { role; content }.
func TestParquetTwoLevelLists(t *testing.T) {
	type message struct {
		Role    string `parquet:"role"`
		Content string `parquet:"content"`
	}
	type groundTruth struct {
		Target []string `parquet:"target"`
	}
	type rewardModel struct {
		Style       string      `parquet:"style"`
		GroundTruth groundTruth `parquet:"ground_truth"`
	}
	type row struct {
		DataSource  string      `parquet:"data_source"`
		Prompt      []message   `parquet:"prompt"`
		RewardModel rewardModel `parquet:"reward_model"`
	}
	var buf bytes.Buffer
	rows := []row{{DataSource: "nq", Prompt: []message{{"user", SearchR1Prompt("who wrote hamlet")}}, RewardModel: rewardModel{"rule", groundTruth{[]string{"Shakespeare", "William Shakespeare"}}}}}
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "legacy.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := openParquet(t, path).Schema().String(); !strings.Contains(s, "repeated group prompt {") || !strings.Contains(s, "repeated binary target") {
		t.Fatalf("not a two-level layout:\n%s", s)
	}
	got, _, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSamples(t, got, []sampleWant{{"nq:row1", "nq", "who wrote hamlet?", []string{"Shakespeare", "William Shakespeare"}, nil}})
}
