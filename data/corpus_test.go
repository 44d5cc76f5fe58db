package data

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestCorpusLayouts(t *testing.T) {
	tests := []struct {
		file      string
		layout    CorpusLayout
		n         int
		firstID   string
		title     string
		textStart string
	}{
		{"testdata/corpus_wiki18.jsonl", LayoutWiki18, 10, "0", "Evan Morris", "Evan Morris Evan L. Morris"},
		{"testdata/corpus_wiki18.jsonl.gz", LayoutWiki18, 10, "0", "Evan Morris", "Evan Morris Evan L. Morris"},
		{"testdata/corpus_kilt.jsonl", LayoutKILT, 10, "1000", "Evan Morris", "Evan L. Morris"},
		// 3 articles x 2 content paragraphs (title and section marker dropped)
		{"testdata/corpus_kilt_source.jsonl", LayoutKILTSource, 6, "5000-1", "Evan Morris", "Evan L. Morris"},
	}
	for _, tc := range tests {
		for _, layout := range []CorpusLayout{LayoutAuto, tc.layout} {
			t.Run(tc.file+"/"+string(layout), func(t *testing.T) {
				ps, skipped, err := ReadCorpus(tc.file, CorpusOptions{Layout: layout})
				if err != nil {
					t.Fatal(err)
				}
				if skipped != 0 || len(ps) != tc.n {
					t.Fatalf("got %d passages, %d skipped; want %d, 0", len(ps), skipped, tc.n)
				}
				p := ps[0]
				if p.ID != tc.firstID || p.Title != tc.title || !strings.HasPrefix(p.Text(), tc.textStart) {
					t.Fatalf("first passage %+v (text %q)", p, p.Text())
				}
				if !strings.Contains(p.Contents, "\n") {
					t.Fatalf("contents lost its title line: %q", p.Contents)
				}
			})
		}
	}
}

func TestCorpusWiki18KeepsQuotedTitleInContents(t *testing.T) {
	r := NewCorpusReader(strings.NewReader(`{"id": "0", "contents": "\"A \"B\"\"\nbody"}`+"\n"), "x", CorpusOptions{})
	p, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if p.Contents != "\"A \"B\"\"\nbody" || p.Title != `A "B"` || p.Text() != "body" {
		t.Fatalf("%+v %q", p, p.Text())
	}
	if r.Layout() != LayoutWiki18 {
		t.Fatalf("layout %s", r.Layout())
	}
}

func TestCorpusNumericIDAndCRLF(t *testing.T) {
	in := "\xef\xbb\xbf{\"id\": 12, \"contents\": \"T\\nx\"}\r\n\r\n{\"id\": \"13\", \"contents\": \"U\\ny\"}"
	r := NewCorpusReader(strings.NewReader(in), "x", CorpusOptions{Layout: LayoutWiki18})
	var ids []string
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	if strings.Join(ids, ",") != "12,13" || r.Line() != 3 {
		t.Fatalf("ids %v line %d", ids, r.Line())
	}
}

// readExpect parses corpus_malformed.expect: "line field" per bad line.
func readExpect(t *testing.T) map[int]string {
	b, err := os.ReadFile("testdata/corpus_malformed.expect")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		num, field, _ := strings.Cut(l, " ")
		n, err := strconv.Atoi(num)
		if err != nil {
			t.Fatal(err)
		}
		want[n] = field
	}
	return want
}

func TestCorpusMalformedFailFast(t *testing.T) {
	_, _, err := ReadCorpus("testdata/corpus_malformed.jsonl", CorpusOptions{Layout: LayoutWiki18})
	var ce *CorpusError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CorpusError, got %v", err)
	}
	if ce.Line != 2 || ce.File != "testdata/corpus_malformed.jsonl" || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v at line %d", err, ce.Line)
	}
}

func TestCorpusMalformedSkip(t *testing.T) {
	r, err := OpenCorpus("testdata/corpus_malformed.jsonl", CorpusOptions{Layout: LayoutWiki18, SkipMalformed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.ID)
	}
	if strings.Join(got, ",") != "0,1" {
		t.Fatalf("good passages %v, want 0,1", got)
	}
	want := readExpect(t)
	n, reports := r.Skipped()
	if n != len(want) || len(reports) != n {
		t.Fatalf("skipped %d (%d reports), want %d", n, len(reports), len(want))
	}
	for _, e := range reports {
		field, ok := want[e.Line]
		if !ok || field != e.Field {
			t.Errorf("unexpected report %v (field %q); want field %q at line %d", e, e.Field, field, e.Line)
		}
	}
}

func TestCorpusMissingFieldsPerLayout(t *testing.T) {
	tests := []struct {
		layout CorpusLayout
		line   string
		field  string
	}{
		{LayoutKILT, `{"id": "1", "contents": "x"}`, "title"},
		{LayoutKILT, `{"id": "1", "title": "x"}`, "contents"},
		{LayoutKILT, `{"title": "t", "contents": "x"}`, "id"},
		{LayoutKILTSource, `{"wikipedia_id": "1", "text": ["a"]}`, "wikipedia_title"},
		{LayoutKILTSource, `{"wikipedia_id": "1", "wikipedia_title": "a"}`, "text"},
		{LayoutKILTSource, `{"wikipedia_id": "1", "wikipedia_title": "a", "text": "flat"}`, "text"},
		{LayoutKILTSource, `{"wikipedia_title": "a", "text": []}`, "_id"},
		{LayoutWiki18, `{"id": "", "contents": "x"}`, "id"},
		{LayoutWiki18, `{"id": null, "contents": "x"}`, "id"},
		{LayoutWiki18, `{"id": "1", "contents": null}`, "contents"},
	}
	for _, tc := range tests {
		r := NewCorpusReader(strings.NewReader(tc.line), "f.jsonl", CorpusOptions{Layout: tc.layout})
		_, err := r.Next()
		var ce *CorpusError
		if !errors.As(err, &ce) || ce.Field != tc.field || ce.Line != 1 || ce.File != "f.jsonl" {
			t.Errorf("%s %s: got %v, want field %q", tc.layout, tc.line, err, tc.field)
		}
	}
}

func TestCorpusLineTooLong(t *testing.T) {
	long := `{"id": "1", "contents": "` + strings.Repeat("x", 5000) + `"}`
	in := `{"id": "0", "contents": "a"}` + "\n" + long + "\n" + `{"id": "2", "contents": "b"}` + "\n"
	r := NewCorpusReader(strings.NewReader(in), "f", CorpusOptions{MaxLineBytes: 1000, SkipMalformed: true})
	var ids []string
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	n, reps := r.Skipped()
	if strings.Join(ids, ",") != "0,2" || n != 1 || reps[0].Line != 2 || !errors.Is(reps[0], ErrLineTooLong) {
		t.Fatalf("ids %v skipped %d %v", ids, n, reps)
	}
	r = NewCorpusReader(strings.NewReader(in), "f", CorpusOptions{MaxLineBytes: 1000})
	r.Next()
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v", err)
	}
	// a long line that still fits is read whole across buffer refills
	r = NewCorpusReader(strings.NewReader(long+"\n"), "f", CorpusOptions{})
	if p, err := r.Next(); err != nil || len(p.Contents) != 5000 {
		t.Fatalf("%v %d", err, len(p.Contents))
	}
}

func TestCorpusTruncatedGzip(t *testing.T) {
	b, err := os.ReadFile("testdata/corpus_wiki18.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/cut.jsonl.gz"
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadCorpus(path, CorpusOptions{})
	if err == nil || !strings.Contains(err.Error(), "cut.jsonl.gz") {
		t.Fatalf("want an error naming the file, got %v", err)
	}
}

func TestParseCorpusLayout(t *testing.T) {
	for in, want := range map[string]CorpusLayout{"": LayoutAuto, "wiki-18": LayoutWiki18, "KILT": LayoutKILT, "kilt-source": LayoutKILTSource} {
		if got, err := ParseCorpusLayout(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseCorpusLayout("msmarco"); err == nil {
		t.Error("unknown layout accepted")
	}
}
