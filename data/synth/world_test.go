package synth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
	"github.com/r1go/r1go/data"
)

// smallConfig is a world small enough for exhaustive checks.
func smallConfig() Config {
	c := DefaultConfig()
	c.Train, c.Validation, c.Test = 600, 50, 50
	return c
}

func mustNew(t testing.TB, c Config) *World {
	t.Helper()
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDefaultWorldSizes(t *testing.T) {
	w := Default()
	if got := len(w.Entities); got != 20+80+200+80+80 {
		t.Errorf("entities = %d, want 460", got)
	}
	// Two facts per entity, one fact per passage.
	if len(w.Facts) != 2*len(w.Entities) || len(w.Passages) != len(w.Facts) {
		t.Errorf("facts %d, passages %d, want %d each", len(w.Facts), len(w.Passages), 2*len(w.Entities))
	}
	if len(w.Train) != 3000 || len(w.Validation) != 200 || len(w.Test) != 200 {
		t.Errorf("splits %d/%d/%d, want 3000/200/200", len(w.Train), len(w.Validation), len(w.Test))
	}
	// Hop mix 0.4/0.35/0.25, by hand: 200 -> 80/70/50, 3000 -> 1200/1050/750.
	want := map[string][3]int{"train": {1200, 1050, 750}, "validation": {80, 70, 50}, "test": {80, 70, 50}}
	for name, split := range map[string][]data.Sample{"train": w.Train, "validation": w.Validation, "test": w.Test} {
		var got [3]int
		for _, s := range split {
			got[len(s.Gold.Steps)-MinHops]++
			if s.Extra["hops"] != strconv.Itoa(len(s.Gold.Steps)) || s.Extra["split"] != name {
				t.Fatalf("%s: Extra %v disagrees with %d steps", s.ID, s.Extra, len(s.Gold.Steps))
			}
		}
		if got != want[name] {
			t.Errorf("%s hop counts %v, want %v", name, got, want[name])
		}
	}
	if got, want := w.Summary(), "synthetic world seed 1: 460 entities, 920 passages; train 3000 (1200/1050/750 by 2/3/4 hops), validation 200 (80/70/50 by 2/3/4 hops), test 200 (80/70/50 by 2/3/4 hops)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}

func TestDeterministicBySeed(t *testing.T) {
	a, b := mustNew(t, smallConfig()), mustNew(t, smallConfig())
	if !reflect.DeepEqual(a.Passages, b.Passages) || !reflect.DeepEqual(a.Train, b.Train) || !reflect.DeepEqual(a.Test, b.Test) {
		t.Fatal("two worlds of one Config differ")
	}
	c := smallConfig()
	c.Seed = 2
	other := mustNew(t, c)
	if reflect.DeepEqual(a.Passages, other.Passages) || a.Test[0].Question == other.Test[0].Question {
		t.Fatal("seeds 1 and 2 gave the same world")
	}
	// Growing Train leaves the corpus and the evaluation splits alone.
	c = smallConfig()
	c.Train = 900
	grown := mustNew(t, c)
	if !reflect.DeepEqual(a.Passages, grown.Passages) || !reflect.DeepEqual(a.Test, grown.Test) || !reflect.DeepEqual(a.Validation, grown.Validation) {
		t.Fatal("a larger train split changed the corpus or the evaluation splits")
	}
}

func TestSplitsShareNoQuestion(t *testing.T) {
	w := Default()
	seen := map[string]string{}
	ids := map[string]bool{}
	for _, split := range [][]data.Sample{w.Train, w.Validation, w.Test} {
		for _, s := range split {
			if prev, ok := seen[s.Question]; ok {
				t.Fatalf("question %q in %s and %s", s.Question, prev, s.ID)
			}
			seen[s.Question] = s.ID
			if ids[s.ID] {
				t.Fatalf("duplicate id %s", s.ID)
			}
			ids[s.ID] = true
		}
	}
}

var sentenceRE = regexp.MustCompile(`^The ([a-z]+) of ([A-Z][a-z]+) is ([A-Z][a-z]+)\.$`)
var questionRE = regexp.MustCompile(`^(Who|What) is (.*) of ([A-Z][a-z]+)\?$`)

// factsFromCorpus reads the facts back from the passage texts alone,
// independently of the generator's tables: (relation, subject) -> object.
func factsFromCorpus(t *testing.T, passages []data.Passage) (map[[2]string]string, map[[2]string]string) {
	t.Helper()
	facts := map[[2]string]string{}
	where := map[[2]string]string{}
	for _, p := range passages {
		title, text, ok := strings.Cut(p.Contents, "\n")
		if !ok || title != `"`+p.Title+`"` {
			t.Fatalf("passage %s: contents %q is not wiki-18 style", p.ID, p.Contents)
		}
		for _, sent := range strings.SplitAfter(text, ". ") {
			m := sentenceRE.FindStringSubmatch(strings.TrimSpace(sent))
			if m == nil {
				t.Fatalf("passage %s: sentence %q does not parse", p.ID, sent)
			}
			if m[2] != p.Title {
				t.Fatalf("passage %s titled %q states a fact about %q", p.ID, p.Title, m[2])
			}
			key := [2]string{m[1], m[2]}
			if _, dup := facts[key]; dup {
				t.Fatalf("fact %v stated twice", key)
			}
			facts[key] = m[3]
			where[key] = p.ID
		}
	}
	return facts, where
}

func TestGoldTrajectoriesFollowTheCorpus(t *testing.T) {
	w := Default()
	facts, where := factsFromCorpus(t, w.Passages)
	for _, split := range [][]data.Sample{w.Train, w.Validation, w.Test} {
		for _, s := range split {
			m := questionRE.FindStringSubmatch(s.Question)
			if m == nil {
				t.Fatalf("%s: question %q does not parse", s.ID, s.Question)
			}
			// "the r3 of the r2 of the r1" read backwards gives the hops.
			var rels []string
			for _, part := range strings.Split(m[2], " of ") {
				rels = append([]string{strings.TrimPrefix(part, "the ")}, rels...)
			}
			if len(rels) < MinHops || len(rels) > MaxHops || len(rels) != len(s.Gold.Steps) {
				t.Fatalf("%s: %d relations, %d gold steps", s.ID, len(rels), len(s.Gold.Steps))
			}
			cur := m[3]
			visited := map[string]bool{cur: true}
			for i, rel := range rels {
				step := s.Gold.Steps[i]
				if want := rel + " of " + cur; step.Query != want {
					t.Fatalf("%s step %d: query %q, want %q", s.ID, i, step.Query, want)
				}
				next, ok := facts[[2]string{rel, cur}]
				if !ok {
					t.Fatalf("%s step %d: the corpus has no %s of %s", s.ID, i, rel, cur)
				}
				if step.Evidence != where[[2]string{rel, cur}] || step.Found != next {
					t.Fatalf("%s step %d: evidence %s/%s, want %s/%s", s.ID, i, step.Evidence, step.Found, where[[2]string{rel, cur}], next)
				}
				if visited[next] {
					t.Fatalf("%s: the chain revisits %s", s.ID, next)
				}
				visited[next] = true
				cur = next
			}
			if len(s.Answers) != 1 || s.Answers[0] != cur || s.Gold.Answer != cur {
				t.Fatalf("%s: answers %v, gold %q, the corpus says %q", s.ID, s.Answers, s.Gold.Answer, cur)
			}
			if strings.Contains(strings.ToLower(s.Question), strings.ToLower(cur)) {
				t.Fatalf("%s: the question %q names its answer", s.ID, s.Question)
			}
			if (m[1] == "Who") != isPersonRelation(rels[len(rels)-1]) {
				t.Fatalf("%s: question word %q does not fit relation %q", s.ID, m[1], rels[len(rels)-1])
			}
		}
	}
}

func isPersonRelation(r string) bool {
	return r == "leader" || r == "mayor" || r == "founder" || r == "author"
}

func TestNamesAreNoSubstringsOfEachOther(t *testing.T) {
	w := Default()
	names := make([]string, len(w.Entities))
	for i, e := range w.Entities {
		names[i] = strings.ToLower(e.Name)
		if !regexp.MustCompile(`^[a-z]{4,}$`).MatchString(names[i]) {
			t.Fatalf("name %q is not one invented word", e.Name)
		}
	}
	words := "the of is who what i need now so answer a an capital leader country mayor birthplace employer founder headquarters author publisher"
	for _, word := range strings.Fields(words) {
		for _, n := range names {
			if n == word {
				t.Fatalf("name %q is a template word", n)
			}
		}
	}
	stems := map[string]string{}
	for _, word := range strings.Fields(words) {
		stems[porterstemmer.StemString(word)] = "template word " + word
	}
	for i, a := range names {
		for j, b := range names {
			if i != j && strings.Contains(a, b) {
				t.Fatalf("name %q contains name %q", a, b)
			}
		}
		stem := porterstemmer.StemString(a)
		if prev, ok := stems[stem]; ok {
			t.Fatalf("name %q stems to %q like %s", a, stem, prev)
		}
		stems[stem] = "name " + a
	}
}

// bm25 is a minimal Okapi BM25 (k1 0.9, b 0.4, lower-cased words), written
// here from the formula so the test does not depend on the env's index.
type bm25 struct {
	docs  [][]string
	df    map[string]int
	avgdl float64
}

// words analyses text as a Lucene English analyzer does: lower-case
// letter/digit runs, stop words dropped, Porter stems.
func words(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
		if !stopWords[w] {
			out = append(out, porterstemmer.StemString(w))
		}
	}
	return out
}

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with") {
		stopWords[w] = true
	}
}

func newBM25(passages []data.Passage) *bm25 {
	b := &bm25{df: map[string]int{}}
	total := 0
	for _, p := range passages {
		ws := words(p.Contents)
		b.docs = append(b.docs, ws)
		total += len(ws)
		seen := map[string]bool{}
		for _, w := range ws {
			if !seen[w] {
				seen[w] = true
				b.df[w]++
			}
		}
	}
	b.avgdl = float64(total) / float64(len(passages))
	return b
}

// top returns the indices of the k best passages for query.
func (b *bm25) top(query string, k int) []int {
	const k1, bb = 0.9, 0.4
	n := float64(len(b.docs))
	scores := make([]float64, len(b.docs))
	for _, q := range words(query) {
		df := float64(b.df[q])
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, d := range b.docs {
			tf := 0.0
			for _, w := range d {
				if w == q {
					tf++
				}
			}
			scores[i] += idf * tf * (k1 + 1) / (tf + k1*(1-bb+bb*float64(len(d))/b.avgdl))
		}
	}
	idx := make([]int, len(b.docs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return scores[idx[i]] > scores[idx[j]] })
	return idx[:k]
}

// The world must make search necessary and sufficient: each gold query
// finds its evidence first, while searching the whole question seldom
// shows the answer.
func TestSearchFindsEachHopButNotTheAnswer(t *testing.T) {
	w := Default()
	index := newBM25(w.Passages)
	rowOf := map[string]int{}
	for i, p := range w.Passages {
		rowOf[p.ID] = i
	}
	leaked := 0
	samples := append(append([]data.Sample(nil), w.Test...), w.Validation...)
	for _, s := range samples {
		for i, step := range s.Gold.Steps {
			if got := index.top(step.Query, 1)[0]; got != rowOf[step.Evidence] {
				t.Fatalf("%s step %d: BM25 top hit for %q is %q, want passage %s", s.ID, i, step.Query, w.Passages[got].Contents, step.Evidence)
			}
		}
		for _, r := range index.top(s.Question, 5) {
			if strings.Contains(w.Passages[r].Contents, "is "+s.Answers[0]+".") {
				leaked++
				break
			}
		}
	}
	// The answer is in the last hop's passage, which names an entity the
	// question does not; only chance term overlap can surface it.
	t.Logf("whole-question search shows the answer for %d of %d questions", leaked, len(samples))
	if frac := float64(leaked) / float64(len(samples)); frac > 0.06 {
		t.Errorf("searching the whole question shows the answer for %.1f%% of questions, want at most 6%%", 100*frac)
	}
}

// Without the tool, the best a model can do is to learn answer priors from
// the training questions: the most frequent train answer for the same
// relation chain. That must stay far below what search reaches.
func TestAnswersAreNotGuessable(t *testing.T) {
	w := Default()
	counts := map[string]map[string]int{}
	for _, s := range w.Train {
		key := s.Extra["relations"]
		if counts[key] == nil {
			counts[key] = map[string]int{}
		}
		counts[key][s.Answers[0]]++
	}
	hits := 0
	for _, s := range w.Test {
		best, bestN := "", 0
		for a, n := range counts[s.Extra["relations"]] {
			if n > bestN || n == bestN && a < best {
				best, bestN = a, n
			}
		}
		if best == s.Answers[0] {
			hits++
		}
	}
	t.Logf("majority-answer baseline: %d of %d test questions", hits, len(w.Test))
	if frac := float64(hits) / float64(len(w.Test)); frac > 0.04 {
		t.Errorf("answer priors alone get %.1f%% of the test split, want at most 4%%", 100*frac)
	}
}

// Objects are dealt evenly: for a relation over s subjects and o
// candidate objects, every candidate is used floor(s/o) or ceil(s/o) times
// (country and capital follow from the city-country deal).
func TestFactsAreBalanced(t *testing.T) {
	w := Default()
	kindCount := map[Kind]int{}
	for _, e := range w.Entities {
		kindCount[e.Kind]++
	}
	for r, rel := range relations {
		if rel.Name == "capital" {
			continue // one of the country's own cities
		}
		uses := map[int]int{}
		for _, f := range w.Facts {
			if f.Relation == r {
				uses[f.Object]++
			}
		}
		subjects, objects := kindCount[rel.Subject], kindCount[rel.Object]
		lo, hi := subjects/objects, (subjects+objects-1)/objects
		if lo > 0 && len(uses) != objects {
			t.Errorf("%s: %d of %d candidates used", rel.Name, len(uses), objects)
		}
		for o, n := range uses {
			if n < lo || n > hi {
				t.Errorf("%s: %s is the object %d times, want %d..%d", rel.Name, w.Entities[o].Name, n, lo, hi)
			}
		}
	}
}

func TestFactsPerPassage(t *testing.T) {
	c := smallConfig()
	c.FactsPerPassage = 2
	w := mustNew(t, c)
	if len(w.Passages) != len(w.Entities) {
		t.Fatalf("%d passages for %d entities at two facts per passage", len(w.Passages), len(w.Entities))
	}
	facts, _ := factsFromCorpus(t, w.Passages)
	if len(facts) != 2*len(w.Entities) {
		t.Fatalf("corpus states %d facts, want %d", len(facts), 2*len(w.Entities))
	}
	index := newBM25(w.Passages)
	for _, s := range w.Test {
		for _, step := range s.Gold.Steps {
			if got := w.Passages[index.top(step.Query, 1)[0]].ID; got != step.Evidence {
				t.Fatalf("%s: top hit %s for %q, want %s", s.ID, got, step.Query, step.Evidence)
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.People = 0 }, "Config.People"},
		{func(c *Config) { c.Cities = 10 }, "every country needs a city"},
		{func(c *Config) { c.Cities = 6000 }, "entities"},
		{func(c *Config) { c.Test = -1 }, "negative"},
		{func(c *Config) { c.HopWeights = [3]float64{} }, "HopWeights"},
		{func(c *Config) { c.HopWeights[1] = math.NaN() }, "HopWeights[1]"},
		{func(c *Config) { c.FactsPerPassage = 0 }, "FactsPerPassage"},
		{func(c *Config) { c.Train = 100000 }, "distinct 2-hop questions"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		_, err := New(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "synth: ") {
			t.Errorf("error %v, want one mentioning %q", err, tc.want)
		}
	}
}

func TestSFTSubset(t *testing.T) {
	w := Default()
	twoHop := 0
	for _, s := range w.Train {
		if len(s.Gold.Steps) == 2 {
			twoHop++
		}
	}
	sft, err := SFTSubset(w.Train, DefaultSFTOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(sft) != twoHop {
		t.Fatalf("default SFT subset has %d samples, want all %d 2-hop ones", len(sft), twoHop)
	}
	half, err := SFTSubset(w.Train, SFTOptions{MaxHops: 3, Fraction: 0.5, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1200 + 1050 + 1) / 2; len(half) != want {
		t.Fatalf("half of the <=3-hop questions: %d, want %d", len(half), want)
	}
	again, _ := SFTSubset(w.Train, SFTOptions{MaxHops: 3, Fraction: 0.5, Seed: 7})
	if !reflect.DeepEqual(half, again) {
		t.Fatal("SFTSubset is not deterministic")
	}
	for _, s := range half {
		if len(s.Gold.Steps) > 3 {
			t.Fatalf("%s has %d hops", s.ID, len(s.Gold.Steps))
		}
	}
	for _, bad := range []SFTOptions{{Fraction: 1.5}, {Fraction: math.NaN()}, {MaxHops: -1, Fraction: 1}} {
		if _, err := SFTSubset(w.Train, bad); err == nil {
			t.Errorf("SFTSubset(%+v) gave no error", bad)
		}
	}
}

func TestWriteCorpusIsWiki18(t *testing.T) {
	w := mustNew(t, smallConfig())
	var buf bytes.Buffer
	if err := w.WriteCorpus(&buf); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	row := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, `{"id": "`+strconv.Itoa(row)+`", "contents": "\"`) {
			t.Fatalf("line %d %q is not spaced as Search-R1's wiki-18", row+1, line)
		}
		var rec struct{ ID, Contents string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.ID != w.Passages[row].ID || rec.Contents != w.Passages[row].Contents {
			t.Fatalf("line %d round-trips to %+v", row+1, rec)
		}
		row++
	}
	if row != len(w.Passages) {
		t.Fatalf("%d lines for %d passages", row, len(w.Passages))
	}
}

// The corpus agent's wiki-18 reader gets back every passage as it is.
func TestCorpusReaderRoundTrip(t *testing.T) {
	w := mustNew(t, smallConfig())
	cr := w.CorpusReader()
	for i := 0; ; i++ {
		p, err := cr.Next()
		if err == io.EOF {
			if i != len(w.Passages) {
				t.Fatalf("%d passages read, %d written", i, len(w.Passages))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p != w.Passages[i] {
			t.Fatalf("passage %d read as %+v, written as %+v", i, p, w.Passages[i])
		}
	}
}

func TestWriteFlashRAG(t *testing.T) {
	w := mustNew(t, smallConfig())
	var buf bytes.Buffer
	if err := WriteFlashRAG(&buf, w.Test); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(w.Test) {
		t.Fatalf("%d lines for %d samples", len(lines), len(w.Test))
	}
	var rec struct {
		ID            string            `json:"id"`
		Question      string            `json:"question"`
		GoldenAnswers []string          `json:"golden_answers"`
		Metadata      map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(lines[3]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != "test-3" || rec.Question != w.Test[3].Question || !reflect.DeepEqual(rec.GoldenAnswers, w.Test[3].Answers) || rec.Metadata["hops"] != w.Test[3].Extra["hops"] {
		t.Fatalf("line 4 decodes to %+v", rec)
	}
}

// Export writes files the data loaders read back as the same samples.
func TestExportLoadsBack(t *testing.T) {
	w := mustNew(t, smallConfig())
	dir := t.TempDir()
	if err := w.Export(dir, data.ParquetLayout{Style: data.StyleSearchR1}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]data.Sample{"train": w.Train, "validation": w.Validation, "test": w.Test} {
		got, _, err := data.Load(filepath.Join(dir, name+".parquet"), data.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		flash, _, err := data.Load(filepath.Join(dir, name+".jsonl"), data.LoadOptions{Format: data.FormatFlashRAG, DataSource: DataSource})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(flash) != len(want) {
			t.Fatalf("%s: %d parquet and %d jsonl samples, want %d", name, len(got), len(flash), len(want))
		}
		for i := range want {
			if got[i].ID != want[i].ID || got[i].Question != want[i].Question || !reflect.DeepEqual(got[i].Answers, want[i].Answers) || got[i].Extra["split"] != name {
				t.Fatalf("%s parquet %d: %+v, want %+v", name, i, got[i], want[i])
			}
			if flash[i].ID != want[i].ID || flash[i].Question != want[i].Question || !reflect.DeepEqual(flash[i].Answers, want[i].Answers) {
				t.Fatalf("%s jsonl %d: %+v, want %+v", name, i, flash[i], want[i])
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Fatal(err)
	}
}

func TestSplitAndObject(t *testing.T) {
	w := mustNew(t, smallConfig())
	for name, want := range map[string][]data.Sample{"train": w.Train, "val": w.Validation, "test": w.Test} {
		got, err := w.Split(name)
		if err != nil || len(got) != len(want) {
			t.Fatalf("Split(%q) = %d samples, %v", name, len(got), err)
		}
	}
	if _, err := w.Split("holdout"); err == nil {
		t.Fatal("Split(holdout) gave no error")
	}
	s := w.Test[0]
	got, ok := w.Object(s.Extra["start"], strings.Split(s.Extra["relations"], ",")[0])
	if !ok || got != s.Gold.Steps[0].Found {
		t.Fatalf("Object = %q, %v; want %q", got, ok, s.Gold.Steps[0].Found)
	}
	if _, ok := w.Object("Nobody", "founder"); ok {
		t.Fatal("Object found a fact about an unknown entity")
	}
}

func TestTexts(t *testing.T) {
	w := mustNew(t, smallConfig())
	texts := w.Texts()
	want := len(w.Passages) + len(w.Train) + len(w.Validation) + len(w.Test)
	for _, s := range w.Train {
		want += len(s.Gold.Steps) + 1
	}
	if len(texts) != want {
		t.Fatalf("%d texts, want %d", len(texts), want)
	}
}

// BenchmarkDefaultWorld generates the embedded default world; its
// denominator, BenchmarkLoadExportedWorld, reads the same world back from
// the files Export writes (three parquet splits and the wiki-18 corpus), the
// alternative to generating it on the fly.
func BenchmarkDefaultWorld(b *testing.B) {
	for b.Loop() {
		if _, err := New(DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadExportedWorld(b *testing.B) {
	dir := b.TempDir()
	if err := Default().Export(dir, data.ParquetLayout{Style: data.StyleSearchR1}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		n := 0
		for _, split := range []string{"train", "validation", "test"} {
			got, _, err := data.Load(filepath.Join(dir, split+".parquet"), data.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			n += len(got)
		}
		f, err := os.Open(filepath.Join(dir, "corpus.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		dec := json.NewDecoder(bufio.NewReader(f))
		var passages []data.Passage
		for dec.More() {
			var rec struct{ ID, Contents string }
			if err := dec.Decode(&rec); err != nil {
				b.Fatal(err)
			}
			passages = append(passages, data.Passage{ID: rec.ID, Contents: rec.Contents})
		}
		f.Close()
		if n != 3400 || len(passages) != 920 {
			b.Fatalf("%d samples, %d passages", n, len(passages))
		}
	}
}

func TestHastyTeacher(t *testing.T) {
	w := Default()
	byID := map[string]data.Sample{}
	for _, s := range w.Train {
		byID[s.ID] = s
	}
	const early = 0.6
	demos, err := SFTSubset(w.Train, SFTOptions{Fraction: 1, EarlyAnswer: early, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(demos) != len(w.Train) {
		t.Fatalf("%d demonstrations, want %d", len(demos), len(w.Train))
	}
	stopped := map[int][]int{} // hops -> count of demonstrations by searches made
	for _, d := range demos {
		gold := byID[d.ID].Gold
		hops, n := len(gold.Steps), len(d.Gold.Steps)
		if stopped[hops] == nil {
			stopped[hops] = make([]int, hops+1)
		}
		stopped[hops][n]++
		if n < 1 || n > hops || !reflect.DeepEqual(d.Gold.Steps, gold.Steps[:n]) {
			t.Fatalf("%s: the demonstration's searches are not a prefix of the gold ones", d.ID)
		}
		last := gold.Steps[n-1]
		if d.Gold.Answer != last.Found {
			t.Fatalf("%s: answers %q after %d searches, want what the last found, %q", d.ID, d.Gold.Answer, n, last.Found)
		}
		want := "The " + last.Query + " is " + last.Found + ". So the answer is " + last.Found + "."
		if d.Gold.FinalThought != want {
			t.Fatalf("%s: final thought %q, want %q", d.ID, d.Gold.FinalThought, want)
		}
		if right := d.Gold.Answer == d.Answers[0]; right != (n == hops) {
			t.Fatalf("%s: %d of %d searches, answer right = %v", d.ID, n, hops, right)
		}
		if n == hops && d.Gold != gold {
			t.Fatalf("%s: a full demonstration should be the gold trajectory itself", d.ID)
		}
	}
	// The chance of stopping after exactly s searches of k is
	// early·(1-early)^(s-1), and (1-early)^(k-1) of going to the end.
	for hops, counts := range stopped {
		total := 0
		for _, c := range counts {
			total += c
		}
		for s := 1; s <= hops; s++ {
			p := math.Pow(1-early, float64(s-1))
			if s < hops {
				p *= early
			}
			got := float64(counts[s]) / float64(total)
			if tol := 4 * math.Sqrt(p*(1-p)/float64(total)); math.Abs(got-p) > tol {
				t.Errorf("%d-hop: %.3f stop after %d searches, want %.3f ± %.3f", hops, got, s, p, tol)
			}
		}
	}
	if h := Hasty(w.Train[0].Gold, len(w.Train[0].Gold.Steps)); h != w.Train[0].Gold {
		t.Error("Hasty with every step should return the gold trajectory")
	}
	for _, bad := range []float64{-0.1, 1, math.NaN()} {
		if _, err := SFTSubset(w.Train, SFTOptions{Fraction: 1, EarlyAnswer: bad}); err == nil {
			t.Errorf("EarlyAnswer %v gave no error", bad)
		}
	}
}
