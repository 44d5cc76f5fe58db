package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

type splitRow struct {
	S      string   `json:"s"`
	Qwen2  []string `json:"qwen2"`
	Llama3 []string `json:"llama3"`
	GPT2   []string `json:"gpt2"`
}

func pieces(m matcher, s string) []string {
	var out []string
	for _, sp := range m.findAll(nil, s) {
		out = append(out, s[sp.start:sp.end])
	}
	return out
}

// TestSplitOracle checks both splitters against Python's regex module
// (testdata/splits.py) and against the Rust tokenizers' own Split
// (Oniguruma, golden/gen_rust.mjs), including the long-s case folding
// that transformers.js lacks; regexp2 lacks it too, so it is checked only
// on the other strings.
func TestSplitOracle(t *testing.T) {
	python := readGolden[splitRow](t, "../splits.jsonl.gz")
	rust := readGolden[splitRow](t, "rust_splits.jsonl.gz")
	if len(rust) != len(python) {
		t.Fatalf("%d Rust rows, %d Python rows", len(rust), len(python))
	}
	rows := append(python, rust...)
	qwenFast, _ := newMatcher(ptr(qwen2Pattern), nil, false)
	llamaFast, _ := newMatcher(ptr(llama3Pattern), nil, false)
	qwenRE, _ := newMatcher(ptr(qwen2Pattern), nil, true)
	llamaRE, _ := newMatcher(ptr(llama3Pattern), nil, true)
	gpt2, _ := newMatcher(ptr(gpt2Pattern), nil, false)
	if _, ok := qwenRE.(regexMatcher); !ok {
		t.Fatal("forced matcher is not regexp2")
	}
	longS := 0
	for _, r := range rows {
		check := func(name string, m matcher, want []string) {
			if got := pieces(m, r.S); !slices.Equal(got, want) {
				t.Errorf("%s split of %q = %q, want %q", name, r.S, got, want)
			}
		}
		check("qwen2 hand-written", qwenFast, r.Qwen2)
		check("llama3 hand-written", llamaFast, r.Llama3)
		check("gpt2 regexp2", gpt2, r.GPT2)
		if strings.Contains(r.S, "ſ") {
			longS++
			continue
		}
		check("qwen2 regexp2", qwenRE, r.Qwen2)
		check("llama3 regexp2", llamaRE, r.Llama3)
	}
	if len(rows) < 6000 || longS < 18 {
		t.Fatalf("%d rows, %d with long s", len(rows), longS)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSplitBehaviors follows the examples of the Hugging Face
// SplitDelimiterBehavior documentation, splitting on "-".
func TestSplitBehaviors(t *testing.T) {
	const text = "the-final--countdown"
	for name, want := range map[string][]string{
		"Removed":            {"the", "final", "countdown"},
		"Isolated":           {"the", "-", "final", "-", "-", "countdown"},
		"MergedWithPrevious": {"the-", "final-", "-", "countdown"},
		"MergedWithNext":     {"the", "-final", "-", "-countdown"},
		"Contiguous":         {"the", "-", "final", "--", "countdown"},
	} {
		st := splitStep{m: literalMatcher("-"), behavior: splitBehaviors[name]}
		got, _ := st.split(nil, text, nil)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestMergeOrders checks that the heap merge used for long pieces and the
// scan used for short ones agree, on pieces of every length up to 400.
func TestMergeOrders(t *testing.T) {
	tok, err := Load("testdata/llama3")
	if err != nil {
		t.Fatal(err)
	}
	st := tok.state()
	words := []string{"the", "hello", "world", "Привет", "你好", "  ", "model", "1234567"}
	for n := 1; n <= 400; n++ {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[(n+b.Len())%len(words)])
		}
		var syms []int32
		for _, c := range []byte(b.String()) {
			syms = append(syms, tok.model.byteIDs[c])
		}
		short := tok.model.mergeShort(slices.Clone(syms), st)
		long := tok.model.mergeLong(slices.Clone(syms))
		if !slices.Equal(short, long) {
			t.Fatalf("piece %q: scan %v, heap %v", b.String(), short, long)
		}
	}
}

// TestAddedTokenFlags checks lstrip, rstrip, single_word, leftmost-longest
// and normalized matching, with results worked out by hand from the Hugging
// Face AddedToken documentation.
func TestAddedTokenFlags(t *testing.T) {
	toks := []*AddedToken{
		{ID: 1, Content: "<l>", LStrip: true},
		{ID: 2, Content: "<r>", RStrip: true},
		{ID: 3, Content: "<w>", SingleWord: true},
		{ID: 4, Content: "<a>"},
		{ID: 5, Content: "<a><b>"},
	}
	m := newAddedMatcher(toks, func(*AddedToken) bool { return true })
	show := func(ps []piece) []string {
		var out []string
		for _, p := range ps {
			if p.id >= 0 {
				out = append(out, "#"+string(rune('0'+p.id)))
			} else {
				out = append(out, p.text)
			}
		}
		return out
	}
	for in, want := range map[string][]string{
		"a \t<l> b":    {"a", "#1", " b"},
		"a <r> \n b":   {"a ", "#2", "b"},
		"x<w>y":        {"x<w>y"},
		"x <w> y":      {"x ", "#3", " y"},
		"<w>":          {"#3"},
		"é<w>":         {"é<w>"},
		"<a><b><a>":    {"#5", "#4"},
		"<a><b":        {"#4", "<b"},
		"<l><l>":       {"#1", "#1"},
		"  <l>":        {"#1"},
		"<r>  ":        {"#2"},
		"no tokens":    {"no tokens"},
		"<a>x<r> <l>y": {"#4", "x", "#2", "#1", "y"},
	} {
		if got := show(m.split(nil, in)); !slices.Equal(got, want) {
			t.Errorf("split(%q) = %q, want %q", in, got, want)
		}
	}

	// A normalized token is matched in the NFC text: "é" spelled e+U+0301
	// still hits it; a non-normalized token must match the raw text.
	tok := loadFixture(t, "qwen2")
	tok.added = append(tok.added, &AddedToken{ID: 9999, Content: "é", Normalized: true})
	tok.all.norm = newAddedMatcher(tok.added, func(a *AddedToken) bool { return a.Normalized })
	ids := tok.Encode("e\u0301<|im_end|>")
	imEnd, _ := tok.TokenID("<|im_end|>")
	if !slices.Equal(ids, []int{9999, imEnd}) {
		t.Errorf("normalized added token: %v", ids)
	}
}

// TestByteLevelPrefixSpace: a ByteLevel pre-tokenizer with
// add_prefix_space and use_regex (RoBERTa, GPT-2 style) puts a space in
// front of every text segment that lacks one, added tokens splitting
// segments, and then splits by the GPT-2 pattern.
func TestByteLevelPrefixSpace(t *testing.T) {
	data := strings.Replace(tinyJSON, "VOCAB", tinyVocab(), 1)
	data = strings.Replace(data, `{"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "\\s+|\\w+|[^\\s\\w]+"}, "behavior": "Isolated", "invert": false},
   {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}`, `{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}`, 1)
	tok, err := Parse([]byte(data), "prefix.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.steps) != 1 {
		t.Fatalf("steps %v", tok.steps)
	}
	for in, want := range map[string]string{
		"abc":         " abc",
		" abc":        " abc",
		"abc<|x|>abc": " abc<|x|> abc",
		"<|x|> ab":    "<|x|> ab",
	} {
		if got := tok.Decode(tok.Encode(in)); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", in, got, want)
		}
	}
	// " abc" is one GPT-2 piece: " " then the merges a+b, ab+c.
	space := int(tok.model.byteIDs[' '])
	if got := tok.Encode("abc"); !slices.Equal(got, []int{space, 257}) {
		t.Errorf("Encode(abc) = %v, want [%d 257]", got, space)
	}
}
