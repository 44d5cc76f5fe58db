package env

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

const fixtureCorpus = "../data/testdata/corpus_wiki18.jsonl"

func buildFromString(t *testing.T, jsonl string, an AnalyzerConfig, p BM25Params) *Index {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.bm25")
	cr := data.NewCorpusReader(strings.NewReader(jsonl), "mem", data.CorpusOptions{})
	if _, err := BuildIndex(cr, path, BuildOptions{Analyzer: an, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	ix, err := OpenIndex(path, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func newFixtureReader(t testing.TB) *data.CorpusReader {
	t.Helper()
	cr, err := data.OpenCorpus(fixtureCorpus, data.CorpusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cr.Close() })
	return cr
}

func buildFixture(t *testing.T, an AnalyzerConfig) (*Index, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wiki.bm25")
	ix, built, _, err := OpenOrBuildIndex(fixtureCorpus, path, data.CorpusOptions{}, BuildOptions{Analyzer: an}, DefaultBM25)
	if err != nil || !built {
		t.Fatalf("built=%v err=%v", built, err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, path
}

// TestBM25HandComputed checks the scores of a 3-passage corpus worked out
// by hand (k1 = 1, b = 0.5, no stemming or stop words):
//
//	d0 "apple banana apple" (3 terms), d1 "banana cherry" (2),
//	d2 "cherry cherry cherry date" (4); N = 3, avglen = 3
//	idf(apple) = ln(1 + 2.5/1.5) = ln(8/3); idf(cherry) = ln(1 + 1.5/2.5) = ln(1.6)
//	d0: norm 1,    apple tf 2:  ln(8/3) * 2*2/(2+1)      = 1.30777...
//	d2: norm 7/6,  cherry tf 3: ln(1.6) * 3*2/(3+7/6)    = ln(1.6) * 1.44   = 0.67680...
//	d1: norm 5/6,  cherry tf 1: ln(1.6) * 1*2/(1+5/6)    = ln(1.6) * 12/11  = 0.51273...
func TestBM25HandComputed(t *testing.T) {
	corpus := `{"id": "0", "contents": "apple banana apple"}
{"id": "1", "contents": "banana cherry"}
{"id": "2", "contents": "cherry cherry cherry date"}
`
	ix := buildFromString(t, corpus, AnalyzerConfig{NoStem: true, NoStopWords: true}, BM25Params{K1: 1, B: 0.5})
	hits, err := ix.Search("apple cherry", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		doc   uint32
		score float64
	}{{0, math.Log(8.0/3) * 4 / 3}, {2, math.Log(1.6) * 1.44}, {1, math.Log(1.6) * 12 / 11}}
	if len(hits) != 3 {
		t.Fatalf("%d hits", len(hits))
	}
	for i, w := range want {
		if hits[i].Doc != w.doc || math.Abs(hits[i].Score-w.score) > 1e-12 {
			t.Errorf("hit %d: doc %d score %.15f, want doc %d score %.15f", i, hits[i].Doc, hits[i].Score, w.doc, w.score)
		}
	}
	if math.Abs(hits[0].Score-1.30777234) > 1e-8 || hits[0].Passage.ID != "0" || hits[0].Passage.Contents != "apple banana apple" {
		t.Errorf("hit 0 %+v", hits[0])
	}
	if hits, _ := ix.Search("apple cherry", 1); len(hits) != 1 || hits[0].Doc != 0 {
		t.Errorf("top-1 %+v", hits)
	}
	if hits, _ := ix.Search("durian", 5); len(hits) != 0 {
		t.Errorf("unknown term matched %+v", hits)
	}
}

func TestBM25AgainstNumpy(t *testing.T) {
	b, err := os.ReadFile("testdata/bm25_numpy.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		K1, B   float64
		Queries []struct {
			Query string
			Hits  [][2]float64
		}
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	ix, _ := buildFixture(t, AnalyzerConfig{NoStem: true})
	ix.SetParams(BM25Params{K1: ref.K1, B: ref.B})
	for _, q := range ref.Queries {
		hits, err := ix.Search(q.Query, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != len(q.Hits) {
			t.Errorf("%q: %d hits, numpy %d", q.Query, len(hits), len(q.Hits))
			continue
		}
		for i, h := range hits {
			if h.Doc != uint32(q.Hits[i][0]) || math.Abs(h.Score-q.Hits[i][1]) > 1e-9*math.Max(1, q.Hits[i][1]) {
				t.Errorf("%q hit %d: doc %d %.12f, numpy doc %v %.12f", q.Query, i, h.Doc, h.Score, q.Hits[i][0], q.Hits[i][1])
			}
		}
	}
}

func TestAnalyzer(t *testing.T) {
	got := strings.Join(AnalyzerConfig{}.Analyze("The Curie's Laboratories were RUNNING in Kraków’s 1903 café, ΣΑΣ"), " ")
	want := "curi laboratori were run kraków 1903 café σασ"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if got := strings.Join(AnalyzerConfig{NoStem: true, NoStopWords: true}.Analyze("the cats' toys"), " "); got != "the cats toys" {
		t.Fatalf("got %q", got)
	}
}

func TestIndexReuseAndStemmedSearch(t *testing.T) {
	ix, path := buildFixture(t, AnalyzerConfig{})
	if ix.Len() != 10 || ix.Terms() == 0 || ix.MemoryBytes() <= 0 {
		t.Fatalf("len %d terms %d", ix.Len(), ix.Terms())
	}
	hits, err := ix.Search("Where was Marie Curie born?", 3)
	if err != nil || len(hits) == 0 || hits[0].Passage.Title != "Warsaw" || !strings.HasPrefix(hits[0].Passage.Contents, "\"Warsaw\"\n") {
		t.Fatalf("%v %+v", err, hits)
	}
	ix2, built, _, err := OpenOrBuildIndex(fixtureCorpus, path, data.CorpusOptions{}, BuildOptions{}, DefaultBM25)
	if err != nil || built {
		t.Fatalf("index not reused: built=%v err=%v", built, err)
	}
	ix2.Close()
	// another analyzer means another index
	ix3, built, _, err := OpenOrBuildIndex(fixtureCorpus, path, data.CorpusOptions{}, BuildOptions{Analyzer: AnalyzerConfig{NoStem: true}}, DefaultBM25)
	if err != nil || !built {
		t.Fatalf("index not rebuilt for a new analyzer: built=%v err=%v", built, err)
	}
	ix3.Close()
}

func TestIndexCorruption(t *testing.T) {
	_, path := buildFixture(t, AnalyzerConfig{})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func([]byte) []byte{
		"magic":     func(b []byte) []byte { b[0] = 'X'; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-7] },
		"flipped":   func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b },
		"header":    func(b []byte) []byte { b[20] = '#'; return b },
		"empty":     func(b []byte) []byte { return nil },
	}
	for name, mutate := range cases {
		p := filepath.Join(t.TempDir(), name+".bm25")
		if err := os.WriteFile(p, mutate(append([]byte(nil), orig...)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenIndex(p, DefaultBM25)
		var ie *IndexError
		if !errors.As(err, &ie) || ie.Path != p {
			t.Errorf("%s: want an IndexError naming the file, got %v", name, err)
		}
	}
	if _, err := OpenIndex(path, BM25Params{K1: 1, B: 2}); err == nil {
		t.Error("b = 2 accepted")
	}
}

func TestBuildIndexStopsOnMalformedCorpus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.bm25")
	cr, err := data.OpenCorpus("../data/testdata/corpus_malformed.jsonl", data.CorpusOptions{Layout: data.LayoutWiki18})
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	_, err = BuildIndex(cr, path, BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "corpus_malformed.jsonl line 2") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed build left an index behind")
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed build left its temporary file")
	}
	cr2, _ := data.OpenCorpus("../data/testdata/corpus_malformed.jsonl", data.CorpusOptions{Layout: data.LayoutWiki18, SkipMalformed: true})
	defer cr2.Close()
	st, err := BuildIndex(cr2, path, BuildOptions{})
	if err != nil || st.Passages != 2 || st.Skipped != 6 {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestBuildWithSpilledRuns forces a run per batch and checks the merged
// index equals the one built in memory: same postings section, same hits.
func TestBuildWithSpilledRuns(t *testing.T) {
	var corpus strings.Builder
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda")
	for i := 0; i < 3000; i++ {
		corpus.WriteString(`{"id": "` + strconv.Itoa(i) + `", "contents": "T` + strconv.Itoa(i) + `\n`)
		for j := 0; j < 1+i%7; j++ {
			corpus.WriteString(words[(i*j+i/3)%len(words)] + " ")
		}
		corpus.WriteString(`"}` + "\n")
	}
	dir := t.TempDir()
	build := func(name string, budget int64) (*Index, BuildStats) {
		cr := data.NewCorpusReader(strings.NewReader(corpus.String()), "mem", data.CorpusOptions{})
		st, err := BuildIndex(cr, filepath.Join(dir, name), BuildOptions{MemoryBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		ix, err := OpenIndex(filepath.Join(dir, name), DefaultBM25)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix, st
	}
	mem, st1 := build("mem.bm25", 0)
	spilled, st2 := build("runs.bm25", 1)
	if st1.Runs != 1 || st2.Runs < 5 {
		t.Fatalf("runs %d and %d", st1.Runs, st2.Runs)
	}
	if mem.meta.Postings != spilled.meta.Postings || mem.meta.TermBlob != spilled.meta.TermBlob || mem.meta.DF != spilled.meta.DF {
		t.Fatalf("sections differ: %+v vs %+v", mem.meta.Postings, spilled.meta.Postings)
	}
	for _, q := range []string{"alpha", "gamma theta", "kappa lambda alpha", "T17"} {
		a, _ := mem.Search(q, 10)
		b, _ := spilled.Search(q, 10)
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%q: %d vs %d hits", q, len(a), len(b))
		}
		for i := range a {
			if a[i].Doc != b[i].Doc || a[i].Score != b[i].Score {
				t.Fatalf("%q hit %d: %+v vs %+v", q, i, a[i], b[i])
			}
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.run*")); len(m) != 0 {
		t.Fatalf("run files left: %v", m)
	}
}
