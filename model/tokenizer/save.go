package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Save writes tokenizer.json, tokenizer_config.json (when there is one) and
// chat_template.jinja into dir, creating it. A loaded tokenizer writes the
// files it was read from byte for byte; a trained one writes the layout the
// Hugging Face tokenizers library writes.
func (t *Tokenizer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	files := map[string][]byte{"tokenizer.json": t.fileJSON}
	if t.configJSON != nil {
		files["tokenizer_config.json"] = t.configJSON
	}
	if t.templates.text != "" {
		files["chat_template.jinja"] = []byte(t.templates.text)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
	}
	return nil
}

// jsonObject writes a JSON object with keys in the order given, as the
// tokenizers library lays its files out (a Go map would sort them).
type jsonObject []jsonField

type jsonField struct {
	key string
	val any
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoEscape(f.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalNoEscape is json.Marshal without the HTML escaping of <, > and &,
// which would turn every "<|im_end|>" into "\u003c|im_end|\u003e".
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// buildJSON lays out a tokenizer.json for a byte-level BPE; tokens are the
// raw bytes of each id (nil: only the 256 byte tokens), merges pairs of ids.
func buildJSON(opts TrainOptions, tokens []string, merges [][2]int) ([]byte, error) {
	if tokens == nil {
		for _, b := range byteOrder {
			tokens = append(tokens, string([]byte{b}))
		}
	}
	vocab := make(jsonObject, len(tokens))
	for id, tok := range tokens {
		vocab[id] = jsonField{byteLevelString(tok), id}
	}
	mergeList := make([]any, len(merges))
	for i, m := range merges {
		l, r := byteLevelString(tokens[m[0]]), byteLevelString(tokens[m[1]])
		if opts.MergesAsStrings {
			mergeList[i] = l + " " + r
		} else {
			mergeList[i] = []string{l, r}
		}
	}
	var added []any
	seen := map[string]bool{}
	for i, a := range opts.AddedTokens {
		if a.Content == "" || seen[a.Content] {
			return nil, fmt.Errorf("tokenizer: Train: AddedTokens[%d]: empty or repeated content %q", i, a.Content)
		}
		seen[a.Content] = true
		added = append(added, jsonObject{
			{"id", len(tokens) + i}, {"content", a.Content}, {"single_word", a.SingleWord},
			{"lstrip", a.LStrip}, {"rstrip", a.RStrip}, {"normalized", a.Normalized}, {"special", a.Special},
		})
	}
	byteLevel := func(trimOffsets bool) jsonObject {
		return jsonObject{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", trimOffsets}, {"use_regex", false}}
	}
	var normalizer any
	if !opts.NoNormalizer {
		normalizer = jsonObject{{"type", "NFC"}}
	}
	var post any = byteLevel(false)
	if opts.BOSToken != "" {
		bosID := -1
		for i, a := range opts.AddedTokens {
			if a.Content == opts.BOSToken {
				bosID = len(tokens) + i
			}
		}
		if bosID < 0 {
			return nil, fmt.Errorf("tokenizer: Train: BOSToken %q is not among AddedTokens", opts.BOSToken)
		}
		seq := func(id string) jsonObject {
			return jsonObject{{"Sequence", jsonObject{{"id", id}, {"type_id", 0}}}}
		}
		bos := jsonObject{{"SpecialToken", jsonObject{{"id", opts.BOSToken}, {"type_id", 0}}}}
		post = jsonObject{{"type", "Sequence"}, {"processors", []any{
			byteLevel(false),
			jsonObject{
				{"type", "TemplateProcessing"},
				{"single", []any{bos, seq("A")}},
				{"pair", []any{bos, seq("A"), bos, seq("B")}},
				{"special_tokens", jsonObject{{opts.BOSToken, jsonObject{
					{"id", opts.BOSToken}, {"ids", []int{bosID}}, {"tokens", []string{opts.BOSToken}},
				}}}},
			},
		}}}
	}
	file := jsonObject{
		{"version", "1.0"},
		{"truncation", nil},
		{"padding", nil},
		{"added_tokens", added},
		{"normalizer", normalizer},
		{"pre_tokenizer", jsonObject{{"type", "Sequence"}, {"pretokenizers", []any{
			jsonObject{{"type", "Split"}, {"pattern", jsonObject{{"Regex", opts.Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
			byteLevel(opts.BOSToken != ""),
		}}}},
		{"post_processor", post},
		{"decoder", byteLevel(true)},
		{"model", jsonObject{
			{"type", "BPE"}, {"dropout", nil}, {"unk_token", nil}, {"continuing_subword_prefix", ""},
			{"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
			{"ignore_merges", opts.IgnoreMerges}, {"vocab", vocab}, {"merges", mergeList},
		}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(file); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// buildConfigJSON writes the tokenizer_config.json of a trained tokenizer.
func buildConfigJSON(t *Tokenizer, opts TrainOptions) ([]byte, error) {
	pick := func(given, fallback string) any {
		if given == "" {
			if _, ok := t.TokenID(fallback); ok {
				return fallback
			}
			return nil
		}
		return given
	}
	decoder := jsonObject{}
	var extra []string
	for _, a := range t.added {
		decoder = append(decoder, jsonField{fmt.Sprint(a.ID), jsonObject{
			{"content", a.Content}, {"lstrip", a.LStrip}, {"normalized", a.Normalized},
			{"rstrip", a.RStrip}, {"single_word", a.SingleWord}, {"special", a.Special},
		}})
		if a.Special {
			extra = append(extra, a.Content)
		}
	}
	var bos any
	if opts.BOSToken != "" {
		bos = opts.BOSToken
	}
	cfg := jsonObject{
		{"add_bos_token", false},
		{"add_prefix_space", false},
		{"added_tokens_decoder", decoder},
		{"additional_special_tokens", extra},
		{"bos_token", bos},
		{"clean_up_tokenization_spaces", false},
		{"eos_token", pick(opts.EOSToken, "<|im_end|>")},
		{"errors", "replace"},
		{"model_max_length", 131072},
		{"pad_token", pick(opts.PadToken, "<|endoftext|>")},
		{"split_special_tokens", false},
		{"tokenizer_class", "PreTrainedTokenizerFast"},
		{"unk_token", nil},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
