package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Load reads a Hugging Face model folder: tokenizer.json (required),
// tokenizer_config.json and the chat template (chat_template.jinja, else
// tokenizer_config.json's "chat_template"; named templates from
// additional_chat_templates/*.jinja). A folder without a template gets the
// built-in Qwen2.5 one.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if err := t.loadConfig(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// Parse builds a tokenizer from the bytes of a tokenizer.json; name is used
// in error messages. It has no chat template but the built-in one and no
// tokenizer_config.json settings.
func Parse(data []byte, name string) (*Tokenizer, error) {
	fail := func(field, format string, args ...any) error {
		return fmt.Errorf("tokenizer: %s: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	var file struct {
		AddedTokens  []*AddedToken   `json:"added_tokens"`
		Normalizer   json.RawMessage `json:"normalizer"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Model        json.RawMessage `json:"model"`
		Decoder      json.RawMessage `json:"decoder"`
		// truncation, padding and post_processor are read by nothing: a
		// re-saved file can carry a fixed padding that must never be applied
		// silently, and templates write BOS/EOS themselves.
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", name, describeJSONError(data, err))
	}
	t := &Tokenizer{source: name, fileJSON: data}
	if err := t.parseModel(file.Model, fail); err != nil {
		return nil, err
	}
	if err := t.parseNormalizer(file.Normalizer, fail); err != nil {
		return nil, err
	}
	byteLevel, err := t.parsePreTokenizer(file.PreTokenizer, "pre_tokenizer", fail)
	if err != nil {
		return nil, err
	}
	t.model.byteLevel = byteLevel
	if err := checkDecoder(file.Decoder, byteLevel, fail); err != nil {
		return nil, err
	}
	if err := t.buildTables(file.AddedTokens, fail); err != nil {
		return nil, err
	}
	t.templates.builtin = true
	t.templates.text = qwen25Template
	return t, nil
}

type failFunc func(field, format string, args ...any) error

// typed reads the "type" of a tokenizer.json component.
func typed(raw json.RawMessage) (string, bool) {
	var head struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(raw, &head) != nil || head.Type == nil {
		return "", false
	}
	return *head.Type, true
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func (t *Tokenizer) parseModel(raw json.RawMessage, fail failFunc) error {
	if isNull(raw) {
		return fail("model", "missing")
	}
	// One decoding of the (large) model object; "type" is read with it.
	var m struct {
		Type                    *string           `json:"type"`
		Vocab                   map[string]int    `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		FuseUnk                 bool              `json:"fuse_unk"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fail("model", "%s", describeJSONError(raw, err))
	}
	switch {
	case m.Type == nil && m.Merges == nil:
		return fail("model.type", "missing")
	case m.Type != nil && *m.Type != "BPE":
		// (tokenizers omits "type" for BPE in some old files; a vocab
		// with merges is unambiguous.)
		return fail("model.type", "unsupported model type %q (only BPE is supported)", *m.Type)
	}
	switch {
	case m.Vocab == nil:
		return fail("model.vocab", "missing")
	case m.Merges == nil:
		return fail("model.merges", "missing")
	case m.Dropout != nil && *m.Dropout > 0:
		return fail("model.dropout", "BPE dropout %v is not supported (encoding would be random)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fail("model.continuing_subword_prefix", "%q is not supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fail("model.end_of_word_suffix", "%q is not supported", *m.EndOfWordSuffix)
	case m.ByteFallback:
		return fail("model.byte_fallback", "byte fallback is not supported")
	}
	b := &t.model
	b.vocab = m.Vocab
	b.ignoreMerges = m.IgnoreMerges
	b.fuseUnk = m.FuseUnk
	b.unkID = -1
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fail("model.unk_token", "%q is not in model.vocab", *m.UnkToken)
		}
		b.unkID = id
	}
	for tok, id := range m.Vocab {
		if id < 0 {
			return fail("model.vocab", "token %q has negative id %d", tok, id)
		}
	}
	b.merges = make(map[uint64]uint64, len(m.Merges))
	for i, rawMerge := range m.Merges {
		field := fmt.Sprintf("model.merges[%d]", i)
		var left, right string
		var str string
		var pair []string
		rawMerge = bytes.TrimSpace(rawMerge)
		switch {
		case len(rawMerge) > 0 && rawMerge[0] == '"' && json.Unmarshal(rawMerge, &str) == nil:
			var ok bool
			if left, right, ok = splitMerge(str, m.Vocab); !ok {
				return fail(field, "%q is not two tokens separated by a space", str)
			}
		case len(rawMerge) > 0 && rawMerge[0] == '[' && json.Unmarshal(rawMerge, &pair) == nil && len(pair) == 2:
			left, right = pair[0], pair[1]
		default:
			return fail(field, "%s is neither \"a b\" nor [\"a\", \"b\"]", rawMerge)
		}
		l, ok := m.Vocab[left]
		if !ok {
			return fail(field, "token %q is not in model.vocab", left)
		}
		r, ok := m.Vocab[right]
		if !ok {
			return fail(field, "token %q is not in model.vocab", right)
		}
		merged, ok := m.Vocab[left+right]
		if !ok {
			return fail(field, "merged token %q is not in model.vocab", left+right)
		}
		// A later duplicate overrides an earlier one, as in tokenizers.
		b.merges[pairKey(int32(l), int32(r))] = uint64(i)<<32 | uint64(uint32(merged))
	}
	return nil
}

func (t *Tokenizer) parseNormalizer(raw json.RawMessage, fail failFunc) error {
	if isNull(raw) {
		return nil
	}
	var steps []normalizer
	var walk func(raw json.RawMessage, field string) error
	walk = func(raw json.RawMessage, field string) error {
		kind, ok := typed(raw)
		if !ok {
			return fail(field+".type", "missing")
		}
		if kind == "Sequence" {
			var seq struct {
				Normalizers []json.RawMessage `json:"normalizers"`
			}
			if err := json.Unmarshal(raw, &seq); err != nil {
				return fail(field, "%v", err)
			}
			for i, n := range seq.Normalizers {
				if err := walk(n, fmt.Sprintf("%s.normalizers[%d]", field, i)); err != nil {
					return err
				}
			}
			return nil
		}
		n, ok := normalizerFor(kind)
		if !ok {
			return fail(field+".type", "unsupported normalizer %q", kind)
		}
		steps = append(steps, n)
		return nil
	}
	if err := walk(raw, "normalizer"); err != nil {
		return err
	}
	if len(steps) > 0 {
		t.normalize = chainNormalizers(steps)
	}
	return nil
}

// parsePreTokenizer flattens the pre-tokenizer into t.steps and reports
// whether it ends in ByteLevel (the model then works on bytes).
func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage, field string, fail failFunc) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	kind, ok := typed(raw)
	if !ok {
		return false, fail(field+".type", "missing")
	}
	switch kind {
	case "Sequence":
		var seq struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &seq); err != nil {
			return false, fail(field, "%v", err)
		}
		byteLevel := false
		for i, p := range seq.PreTokenizers {
			if byteLevel {
				return false, fail(fmt.Sprintf("%s.pretokenizers[%d]", field, i), "a pre-tokenizer after ByteLevel is not supported")
			}
			var err error
			if byteLevel, err = t.parsePreTokenizer(p, fmt.Sprintf("%s.pretokenizers[%d]", field, i), fail); err != nil {
				return false, err
			}
		}
		return byteLevel, nil
	case "Split":
		var sp struct {
			Pattern struct {
				Regex  *string `json:"Regex"`
				String *string `json:"String"`
			} `json:"pattern"`
			Behavior string `json:"behavior"`
			Invert   bool   `json:"invert"`
		}
		if err := json.Unmarshal(raw, &sp); err != nil {
			return false, fail(field, "%v", err)
		}
		m, err := newMatcher(sp.Pattern.Regex, sp.Pattern.String, forceGeneralSplitter)
		if err != nil {
			return false, fail(field+".pattern", "%v", err)
		}
		behavior, ok := splitBehaviors[sp.Behavior]
		if !ok {
			return false, fail(field+".behavior", "unknown split behavior %q", sp.Behavior)
		}
		t.steps = append(t.steps, splitStep{m: m, behavior: behavior, invert: sp.Invert})
		return false, nil
	case "ByteLevel":
		var bl struct {
			AddPrefixSpace bool  `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &bl); err != nil {
			return false, fail(field, "%v", err)
		}
		step := byteLevelStep{addPrefixSpace: bl.AddPrefixSpace}
		if bl.UseRegex == nil || *bl.UseRegex { // tokenizers' default is true
			pattern := gpt2Pattern
			m, err := newMatcher(&pattern, nil, false)
			if err != nil {
				return false, fail(field, "%v", err)
			}
			step.regex = m
		}
		if step.addPrefixSpace || step.regex != nil {
			t.steps = append(t.steps, step)
		}
		return true, nil
	}
	return false, fail(field+".type", "unsupported pre-tokenizer %q", kind)
}

// forceGeneralSplitter makes every Split regex use regexp2; tests set it to
// check the general engine against the same golden ids.
var forceGeneralSplitter = false

func checkDecoder(raw json.RawMessage, byteLevel bool, fail failFunc) error {
	if isNull(raw) {
		if byteLevel {
			return fail("decoder", "missing (a ByteLevel pre-tokenizer needs a ByteLevel decoder)")
		}
		return nil
	}
	kind, ok := typed(raw)
	if !ok {
		return fail("decoder.type", "missing")
	}
	if kind != "ByteLevel" {
		return fail("decoder.type", "unsupported decoder %q (only ByteLevel is supported)", kind)
	}
	if !byteLevel {
		return fail("decoder", "a ByteLevel decoder needs a ByteLevel pre-tokenizer")
	}
	return nil
}

// maxIDs bounds the id range: 16.7 million, a hundred times any model's;
// maxIDHoles bounds the ids no token uses (real files have none or a few).
const (
	maxIDs     = 1 << 24
	maxIDHoles = 1 << 16
)

// buildTables fills the id-indexed tables and the added-token matchers.
func (t *Tokenizer) buildTables(added []*AddedToken, fail failFunc) error {
	b := &t.model
	size := 0
	for _, id := range b.vocab {
		size = max(size, id+1)
	}
	for i, a := range added {
		if a == nil || a.Content == "" {
			return fail(fmt.Sprintf("added_tokens[%d].content", i), "empty")
		}
		if a.ID < 0 {
			return fail(fmt.Sprintf("added_tokens[%d].id", i), "negative id %d", a.ID)
		}
		size = max(size, a.ID+1)
	}
	// Ids index dense tables; a stray huge id would allocate gigabytes.
	if size > maxIDs || size > len(b.vocab)+len(added)+maxIDHoles {
		return fail("model.vocab", "id %d is too large for %d tokens (ids index dense tables; at most %d unused ids)",
			size-1, len(b.vocab)+len(added), maxIDHoles)
	}
	t.tokens = make([]string, size)
	t.raw = make([]string, size)
	t.special = make([]bool, size)
	for tok, id := range b.vocab {
		if t.tokens[id] != "" {
			return fail("model.vocab", "id %d is used by both %q and %q", id, t.tokens[id], tok)
		}
		t.tokens[id] = tok
	}
	for i := range b.byteIDs {
		b.byteIDs[i] = -1
		if id, ok := b.vocab[string(byteToRune[i])]; ok {
			b.byteIDs[i] = int32(id)
		}
	}
	for id, tok := range t.tokens {
		if b.byteLevel {
			t.raw[id] = string(appendByteLevelDecoded(nil, tok))
		} else {
			t.raw[id] = tok
		}
	}
	t.added = added
	t.addedIDs = make(map[string]int, len(added))
	for _, a := range added {
		t.addedIDs[a.Content] = a.ID
		t.tokens[a.ID] = a.Content
		t.special[a.ID] = a.Special
		// Added tokens go through the decoder too, so a ByteLevel decoder
		// maps their alphabet runes back to bytes.
		if b.byteLevel {
			t.raw[a.ID] = string(appendByteLevelDecoded(nil, a.Content))
		} else {
			t.raw[a.ID] = a.Content
		}
	}
	sorted := append([]*AddedToken(nil), added...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	t.all = matchers{
		raw:  newAddedMatcher(sorted, func(a *AddedToken) bool { return !a.Normalized }),
		norm: newAddedMatcher(sorted, func(a *AddedToken) bool { return a.Normalized }),
	}
	t.ordinary = matchers{
		raw:  newAddedMatcher(sorted, func(a *AddedToken) bool { return !a.Normalized && !a.Special }),
		norm: newAddedMatcher(sorted, func(a *AddedToken) bool { return a.Normalized && !a.Special }),
	}
	return nil
}

// describeJSONError turns a decoding error into "line L, column C: ..." (or
// names the field for a type error).
func describeJSONError(data []byte, err error) string {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := lineCol(data, syntax.Offset)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, err)
	case errors.As(err, &typeErr):
		return fmt.Sprintf("%s: expected %v, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.Is(err, fs.ErrNotExist):
		return err.Error()
	}
	return err.Error()
}

func lineCol(data []byte, offset int64) (int, int) {
	offset = min(offset, int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
