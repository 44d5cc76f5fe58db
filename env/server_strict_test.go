package env

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
)

// The retriever server as Agent-R1's clients and KILT users meet it.

func TestServerHealthWhileLoading(t *testing.T) {
	s := NewServer(nil, 0, DefaultServerConfig())
	srv := httptest.NewServer(s)
	defer srv.Close()
	code, out := getJSON(t, srv.URL+"/health")
	if code != 503 || out["status"] != "loading" {
		t.Fatalf("loading health: %d %v", code, out)
	}
	if code, _ := postJSON(t, srv.URL+"/retrieve", `{"queries": ["Lake Vostok"]}`); code != 503 {
		t.Fatalf("search while loading: %d", code)
	}
	ix, _ := buildFixture(t, AnalyzerConfig{})
	s.Ready(ix, ix.Len())
	code, out = getJSON(t, srv.URL+"/health")
	if code != 200 || out["status"] != "healthy" || out["passages"].(float64) != float64(ix.Len()) {
		t.Fatalf("ready health: %d %v", code, out)
	}
}

func TestServerTrailingGarbageAndSingleQuery(t *testing.T) {
	srv, _ := fixtureServer(t)
	for _, body := range []string{
		`{"queries": ["Lake Vostok"]} x`,
		`{"queries": ["Lake Vostok"]}{"queries": ["again"]}`,
		`{"queries": ["Lake Vostok"]}]`,
	} {
		for _, path := range []string{"/retrieve", "/search"} {
			if code, out := postJSON(t, srv.URL+path, body); code != 400 || !strings.Contains(out["error"].(string), "request body") {
				t.Errorf("%s %q: %d %v", path, body, code, out)
			}
		}
	}
	// Trailing white space is no garbage.
	if code, _ := postJSON(t, srv.URL+"/retrieve", `{"queries": ["Lake Vostok"]}`+"\n \n"); code != 200 {
		t.Errorf("trailing newline: %d", code)
	}
	// Agent-R1's POST /search with one "query".
	code, out := postJSON(t, srv.URL+"/search", `{"query": "Lake Vostok", "top_k": 2}`)
	if code != 200 {
		t.Fatalf("single query: %d %v", code, out)
	}
	qr := out["query_results"].([]any)
	if len(qr) != 1 || qr[0].(map[string]any)["query"] != "Lake Vostok" || len(qr[0].(map[string]any)["results"].([]any)) != 2 {
		t.Errorf("single query: %v", out)
	}
	if code, _ := postJSON(t, srv.URL+"/search", `{"query": "a", "queries": ["b"]}`); code != 400 {
		t.Errorf("query and queries: %d", code)
	}
	if code, _ := postJSON(t, srv.URL+"/search", `{"query": " "}`); code != 400 {
		t.Errorf("blank query: %d", code)
	}
}

// A KILT corpus keeps wikipedia_id through the index file and the server,
// and every document carries its body as text.
func TestServerDocumentsCarryCorpusFields(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "kilt.jsonl")
	os.WriteFile(corpus, []byte(`{"id": "1", "title": "Lake Vostok", "contents": "Lake Vostok\nLake Vostok lies under Vostok Station.", "wikipedia_id": "5001"}
{"id": "2", "title": "Marie Curie", "contents": "Marie Curie\nMarie Curie was born in Warsaw.", "wikipedia_id": "5002"}
`), 0o644)
	ix, _, _, err := OpenOrBuildIndex(corpus, filepath.Join(dir, "kilt.bm25"), data.CorpusOptions{}, BuildOptions{}, DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	srv := httptest.NewServer(NewServer(ix, ix.Len(), DefaultServerConfig()))
	defer srv.Close()
	code, out := postJSON(t, srv.URL+"/retrieve", `{"queries": ["Vostok Station"], "topk": 1, "return_scores": true}`)
	if code != 200 {
		t.Fatal(code, out)
	}
	doc := out["result"].([]any)[0].([]any)[0].(map[string]any)["document"].(map[string]any)
	if doc["id"] != "1" || doc["wikipedia_id"] != "5001" || doc["text"] != "Lake Vostok lies under Vostok Station." || doc["contents"] != "Lake Vostok\nLake Vostok lies under Vostok Station." {
		t.Errorf("document %v", doc)
	}
	// The clients read wikipedia_id back.
	c, err := NewSearchR1Client(DefaultClientConfig(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	hits, err := c.Retrieve(t.Context(), []string{"Warsaw"}, 1)
	if err != nil || hits[0][0].Passage.WikipediaID != "5002" {
		t.Errorf("client: %+v, %v", hits, err)
	}
	// A wiki-18 index has no wikipedia_id: the field is left out.
	srv2, _ := fixtureServer(t)
	_, out = postJSON(t, srv2.URL+"/retrieve", `{"queries": ["Lake Vostok"], "topk": 1}`)
	doc = out["result"].([]any)[0].([]any)[0].(map[string]any)
	if _, has := doc["wikipedia_id"]; has || doc["text"] == nil {
		t.Errorf("wiki-18 document %v", doc)
	}
}

func TestEmptyCorpusIsAnError(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"empty.jsonl": "", "blank.jsonl": "\n\n"} {
		corpus := filepath.Join(dir, name)
		os.WriteFile(corpus, []byte(content), 0o644)
		idx := filepath.Join(dir, name+".bm25")
		_, _, _, err := OpenOrBuildIndex(corpus, idx, data.CorpusOptions{}, BuildOptions{}, DefaultBM25)
		if err == nil || !strings.Contains(err.Error(), corpus) || !strings.Contains(err.Error(), "holds no passages") {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(idx); err == nil {
			t.Errorf("%s: an index was left behind", name)
		}
	}
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: body not JSON: %v", url, err)
	}
	return resp.StatusCode, out
}
