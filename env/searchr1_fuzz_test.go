package env

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

// FuzzSearchR1Action checks the hand-written matcher against what the
// regex promises: a found action's tags enclose the content, and when
// nothing is found no opening tag has its own closing tag after it.
func FuzzSearchR1Action(f *testing.F) {
	for _, s := range []string{"<search> q </search>", "<search> a </answer> b </search>", "<answer>x</answer>", "<<search>q</search>", "<search>open", "", "<answer></search></answer>"} {
		f.Add(s)
	}
	f.Fuzz(fuzzSearchR1Action)
}

func fuzzSearchR1Action(t *testing.T, turn string) {
	cut := CutSearchR1Turn(turn)
	if !strings.HasPrefix(turn, cut) {
		t.Fatalf("cut %q is not a prefix of %q", cut, turn)
	}
	action, content := ParseSearchR1Action(turn)
	switch action {
	case "search", "answer":
		if content != pyStrip(content) || !strings.Contains(turn, "<"+action+">") || !strings.Contains(turn, "</"+action+">") {
			t.Fatalf("%q: action %q content %q", turn, action, content)
		}
	case "":
		for _, tag := range []string{"search", "answer"} {
			if i := strings.Index(turn, "<"+tag+">"); i >= 0 && strings.Contains(turn[i:], "</"+tag+">") {
				t.Fatalf("%q: missed the %s action", turn, tag)
			}
		}
	default:
		t.Fatalf("action %q", action)
	}
}

// FuzzServerRequest: any body gets 200, 400 or 413, never a 500, and a
// body with bytes after its JSON value is never answered 200.
func FuzzServerRequest(f *testing.F) {
	for _, s := range []string{`{"queries": ["Lake Vostok"], "topk": 2}`, `{"query": "Marie Curie"}`, `{"queries": ["a"]} x`, `{"queries": []}`, `[]`, `{"queries": ["a"], "topk": -1}`, `{"query": "a"}{}`} {
		f.Add(s, true)
		f.Add(s, false)
	}
	ix, _, _, err := OpenOrBuildIndex(fixtureCorpus, filepath.Join(f.TempDir(), "wiki.bm25"), data.CorpusOptions{}, BuildOptions{}, DefaultBM25)
	if err != nil {
		f.Fatal(err)
	}
	defer ix.Close()
	h := NewServer(ix, ix.Len(), DefaultServerConfig())
	f.Fuzz(func(t *testing.T, body string, retrieve bool) { fuzzServerRequest(t, h, body, retrieve) })
}

func fuzzServerRequest(t *testing.T, h http.Handler, body string, retrieve bool) {
	path := "/search"
	if retrieve {
		path = "/retrieve"
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	switch rec.Code {
	case 200:
		trimmed := strings.TrimSpace(body)
		if !strings.HasSuffix(trimmed, "}") {
			t.Fatalf("%s %q answered 200", path, body)
		}
	case 400, 413:
	default:
		t.Fatalf("%s %q: status %d %s", path, body, rec.Code, rec.Body)
	}
}

// Seeded mutations of the same bodies, for machines where the fuzzing
// engine stalls.
func TestMutatedSearchR1AndRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"<search>", "</search>", "<answer>", "</answer>", " q ", "<", ">", "/", "\n", "{", "}", `"queries"`, `"query"`, ":", "[", "]", `"a"`, ",", "x", "1"}
	ix, _ := buildFixture(t, AnalyzerConfig{})
	h := NewServer(ix, ix.Len(), DefaultServerConfig())
	for range 3000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		fuzzSearchR1Action(t, b.String())
		fuzzServerRequest(t, h, b.String(), rng.IntN(2) == 0)
	}
}
