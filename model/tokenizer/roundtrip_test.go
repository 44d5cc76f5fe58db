package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func loadFixture(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var roundTripSeeds = []string{
	"", "hello world", "a\xffb", "\xe2\x82", "\xe2\x82\xac", "\xf0\x9f\x98", "caf\xc3", "\xc0\xaf", "\xed\xa0\x80",
	"<|im_end|>\xff<|im_start|>", "<tool_call>\xf4\x90\x80\x80</tool_call>", "e\u0301", "ſ's 'ſ", "\r\n\t \u3000",
	"👨‍👩‍👧", "x\x00y", strings.Repeat("\xff", 300), strings.Repeat("ab", 500),
}

// FuzzRoundTrip: Decode(Encode(s)) gives back s (after the normalizer) for
// any bytes, valid UTF-8 or not, with and without special-token parsing.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	qwen, llama := loadFixture(f, "qwen2"), loadFixture(f, "llama3")
	f.Fuzz(func(t *testing.T, s string) {
		// Qwen2 normalizes to NFC; Llama 3 has no normalizer.
		if got := qwen.Decode(qwen.Encode(s)); got != norm.NFC.String(s) {
			t.Errorf("qwen2: Decode(Encode(%q)) = %q", s, got)
		}
		if got := qwen.Decode(qwen.EncodeOrdinary(s)); got != norm.NFC.String(s) {
			t.Errorf("qwen2: Decode(EncodeOrdinary(%q)) = %q", s, got)
		}
		if got := llama.Decode(llama.Encode(s)); got != s {
			t.Errorf("llama3: Decode(Encode(%q)) = %q", s, got)
		}
		if utf8.ValidString(s) && norm.NFC.IsNormalString(s) {
			if got := qwen.DecodeText(qwen.Encode(s)); got != s {
				t.Errorf("qwen2: DecodeText(Encode(%q)) = %q", s, got)
			}
		}
		// The stream decoder, fed one id at a time, agrees with DecodeText.
		ids := llama.Encode(s)
		d := llama.NewStreamDecoder()
		var b strings.Builder
		for _, id := range ids {
			chunk := d.Add(id)
			if !utf8.ValidString(chunk) {
				t.Errorf("stream chunk %q is not valid UTF-8", chunk)
			}
			b.WriteString(chunk)
		}
		b.WriteString(d.Flush())
		if want := llama.DecodeText(ids); b.String() != want {
			t.Errorf("stream of %q = %q, want %q", s, b.String(), want)
		}
	})
}

// TestInvalidUTF8 checks that invalid bytes are encoded as their byte
// tokens and come back unchanged.
func TestInvalidUTF8(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	for _, s := range []string{"\xff", "a\xffb", "\xe2\x82", "\xc3(", "\xf0\x28\x8c\x28", "ok\xed\xa0\x80ok"} {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
		if got := tok.DecodeText(ids); !utf8.ValidString(got) || !strings.Contains(got, "\uFFFD") {
			t.Errorf("DecodeText(Encode(%q)) = %q, want U+FFFD replacements", s, got)
		}
	}
	// One U+FFFD per maximal subpart (Unicode 3.9, WHATWG): a truncated
	// 3-byte sequence is one, each stray continuation byte is one.
	for raw, want := range map[string]string{
		"\xe2\x82":         "\uFFFD",
		"\xe2\x82x":        "\uFFFDx",
		"\x82\xac":         "\uFFFD\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD", // a surrogate: E0..9F is not a valid second byte after ED
		"\xf0\x9f\x98":     "\uFFFD",
		"\xf0\x9f\x98\x80": "😀",
		"\xc0\xaf":         "\uFFFD\uFFFD",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
	} {
		if got := string(appendValidUTF8(nil, []byte(raw))); got != want {
			t.Errorf("lossy(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestStreamDecoderHoldsBack(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	// "€" is E2 82 AC: three byte tokens.
	euro := tok.Encode("€")
	byteIDs := []int{int(tok.model.byteIDs[0xE2]), int(tok.model.byteIDs[0x82]), int(tok.model.byteIDs[0xAC])}
	d := tok.NewStreamDecoder()
	if got := d.Add(byteIDs[0]) + d.Add(byteIDs[1]); got != "" {
		t.Fatalf("incomplete character emitted: %q", got)
	}
	if got := d.Add(byteIDs[2]); got != "€" {
		t.Fatalf("completed character: %q", got)
	}
	if tok.Decode(euro) != "€" {
		t.Fatal("€ does not round-trip")
	}
	// A lead byte followed by an ASCII byte cannot complete: emitted as U+FFFD.
	if got := d.Add(byteIDs[0], int(tok.model.byteIDs['a'])); got != "\uFFFDa" {
		t.Fatalf("broken sequence: %q", got)
	}
	if got := d.Add(byteIDs[0]) + d.Flush(); got != "\uFFFD" {
		t.Fatalf("flush of a dangling lead byte: %q", got)
	}
}

func TestEncodeBatch(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	strs := readGolden[string](t, "strings.jsonl.gz")
	batch := tok.EncodeBatch(strs)
	for i, s := range strs {
		if !slices.Equal(batch[i], tok.Encode(s)) {
			t.Fatalf("EncodeBatch[%d] differs from Encode(%q)", i, s)
		}
	}
}

func TestSpecialTokens(t *testing.T) {
	tok := loadFixture(t, "qwen2")
	imEnd, ok := tok.TokenID("<|im_end|>")
	if !ok || !tok.IsSpecial(imEnd) {
		t.Fatalf("<|im_end|>: %d %v", imEnd, ok)
	}
	call, ok := tok.TokenID("<tool_call>")
	if !ok || tok.IsSpecial(call) {
		t.Fatalf("<tool_call>: %d %v", call, ok)
	}
	if eos, ok := tok.EOS(); !ok || eos != imEnd {
		t.Errorf("EOS = %d, want <|im_end|> %d", eos, imEnd)
	}
	if _, ok := tok.BOS(); ok {
		t.Error("Qwen2-style has no BOS")
	}
	// Encode parses both; EncodeOrdinary only the non-special one.
	text := "<tool_call>x</tool_call><|im_end|>"
	if ids := tok.Encode(text); ids[0] != call || ids[len(ids)-1] != imEnd {
		t.Errorf("Encode(%q) = %v", text, ids)
	}
	ids := tok.EncodeOrdinary(text)
	if ids[0] != call || slices.Contains(ids, imEnd) {
		t.Errorf("EncodeOrdinary(%q) = %v", text, ids)
	}
	if tok.Token(imEnd) != "<|im_end|>" || tok.VocabSize() != imEnd+1+(len(tok.AddedTokens())-3) {
		t.Errorf("Token/VocabSize: %q %d", tok.Token(imEnd), tok.VocabSize())
	}
}

// TestBadInput: every broken file gives an error that names the file and
// the field.
func TestBadInput(t *testing.T) {
	good, err := os.ReadFile("testdata/llama3/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	text := string(good)
	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"truncated", text[:len(text)/2], []string{"x.json", "invalid JSON at line"}},
		{"not json", "{\"model\": [1, 2,}", []string{"x.json", "line 1, column"}},
		{"no model", `{"added_tokens": []}`, []string{"x.json", "model: missing"}},
		{"no merges", strings.Replace(text, `"merges"`, `"merges_gone"`, 1), []string{"x.json", "model.merges: missing"}},
		{"unknown model", strings.Replace(text, `"type": "BPE"`, `"type": "Unigram"`, 1), []string{"x.json", "model.type", `"Unigram"`}},
		{"unknown pre-tokenizer", strings.Replace(text, `"type": "Split"`, `"type": "Whitespace"`, 1), []string{"pre_tokenizer.pretokenizers[0].type", `"Whitespace"`}},
		{"bad regex", strings.Replace(text, `"Regex": "(?i:`, `"Regex": "((?i:`, 1), []string{"pre_tokenizer.pretokenizers[0].pattern", "regex"}},
		{"merge not in vocab", strings.Replace(text, `"merges": [`, `"merges": ["zzq qqz", `, 1), []string{"model.merges[0]", `"zzq"`}},
		{"merge shape", strings.Replace(text, `"merges": [`, `"merges": [["a"], `, 1), []string{"model.merges[0]", "neither"}},
		{"unknown decoder", strings.Replace(text, `"decoder": {
    "type": "ByteLevel"`, `"decoder": {
    "type": "WordPiece"`, 1), []string{"decoder.type", `"WordPiece"`}},
		{"dropout", strings.Replace(text, `"dropout": null`, `"dropout": 0.1`, 1), []string{"model.dropout"}},
		{"sparse ids", strings.Replace(text, `"vocab": {`, `"vocab": {"zzsparse": 9000000, `, 1), []string{"model.vocab", "id 9000000 is too large"}},
		{"vocab type", strings.Replace(text, `"vocab": {`, `"vocab": {"bad": "x", `, 1), []string{"x.json", "vocab"}},
	} {
		_, err := Parse([]byte(c.file), "x.json")
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
		if !strings.HasPrefix(err.Error(), "tokenizer: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
	}
}

func TestBadFolder(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("missing tokenizer.json: %v", err)
	}
	tok := loadFixture(t, "qwen2")
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	for content, want := range map[string]string{
		`{"eos_token": "<|nope|>"}`:     `eos_token: "<|nope|>" is not a token`,
		`{"eos_token": 5}`:              "eos_token: neither a string",
		`{"chat_template": 3}`:          "chat_template",
		`{"eos_token": "<|im_end|>",,}`: "invalid JSON at line 1",
	} {
		if err := os.WriteFile(cfg, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), cfg) {
			t.Errorf("config %s: error %v, want it to name %s and %q", content, err, cfg, want)
		}
	}
}

// tinyJSON is a complete byte-level tokenizer.json with two merges.
const tinyJSON = `{"version": "1.0", "added_tokens": [{"id": 258, "content": "<|x|>", "special": true}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "\\s+|\\w+|[^\\s\\w]+"}, "behavior": "Isolated", "invert": false},
   {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "vocab": VOCAB, "merges": ["a b", ["ab", "c"]]}}`

func tinyVocab() string {
	var b strings.Builder
	b.WriteString("{")
	for id, c := range byteOrder {
		if id > 0 {
			b.WriteString(", ")
		}
		q, _ := json.Marshal(string(byteToRune[c]))
		fmt.Fprintf(&b, "%s: %d", q, id)
	}
	b.WriteString(`, "ab": 256, "abc": 257}`)
	return b.String()
}

// FuzzParse: no tokenizer.json, however broken, makes Parse panic, and a
// file that parses encodes and decodes its own seed text.
func FuzzParse(f *testing.F) {
	good := strings.Replace(tinyJSON, "VOCAB", tinyVocab(), 1)
	if _, err := Parse([]byte(good), "tiny.json"); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, `"BPE"`, `"WordPiece"`, 1)))
	f.Add([]byte(strings.Replace(good, `"Isolated"`, `"MergedWithNext"`, 1)))
	f.Add([]byte(strings.Replace(good, `"add_prefix_space": false, "use_regex": false`, `"add_prefix_space": true`, 1)))
	f.Add([]byte(`{"model": {"vocab": {"a": 16777216}, "merges": []}}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`))
	f.Add([]byte(`{"model": 5}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: fuzz.json: ") {
				t.Errorf("error without file name: %v", err)
			}
			return
		}
		for _, s := range []string{"abc abc", "<|x|> a\xffb"} {
			ids := tok.Encode(s)
			tok.DecodeText(ids)
			tok.EncodeOrdinary(s)
		}
	})
}
