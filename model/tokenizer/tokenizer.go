package tokenizer

import (
	"runtime"
	"strings"
	"sync"
)

// Codec is the part of a tokenizer that backends share: Tokenizer, and HF
// (the Rust library, build tag hftokenizers). The golden tests run on every
// Codec the build has.
type Codec interface {
	Encode(text string) []int
	EncodeOrdinary(text string) []int
	DecodeText(ids []int) string
	VocabSize() int
}

var _ Codec = (*Tokenizer)(nil)

// Tokenizer encodes text to token ids and back for one Hugging Face
// tokenizer.json. It is safe for concurrent use; every method may be called
// from many goroutines at once.
type Tokenizer struct {
	source    string     // the file it came from, for error messages
	model     bpe        // vocabulary and merges
	normalize normalizer // nil when tokenizer.json has none
	steps     []preStep  // the pre-tokenizer, flattened

	added    []*AddedToken
	addedIDs map[string]int // added token content -> id
	all      matchers       // Encode: every added token
	ordinary matchers       // EncodeOrdinary: non-special added tokens only
	tokens   []string       // id -> token string as in the file; "" for an unused id
	raw      []string       // id -> the bytes the token decodes to
	special  []bool         // id -> added token marked special

	config    Config
	templates chatTemplates
	kwargs    map[string]any // SetTemplateKwargs: variables of every chat render

	fileJSON, configJSON []byte // what Save writes

	// states keeps idle encodeStates with their warm piece caches. A
	// sync.Pool would drop them, caches and all, at every garbage
	// collection.
	statesOnce sync.Once
	states     chan *encodeState
}

// matchers holds the added-token matchers for the raw text (tokens with
// normalized=false) and for the normalized text (normalized=true).
type matchers struct{ raw, norm *addedMatcher }

// encodeState is the scratch memory of one encoding goroutine, with its own
// piece cache so that parallel encoders never contend on a lock.
type encodeState struct {
	outer, inner []piece
	bufs         pieceBuffers
	sym          []int32
	ranks        []uint64
	cache        map[string][]int
}

// cacheLimit bounds the per-goroutine piece cache; it is cleared when full.
const cacheLimit = 1 << 16

func (t *Tokenizer) state() *encodeState {
	t.statesOnce.Do(func() { t.states = make(chan *encodeState, 2*runtime.GOMAXPROCS(0)) })
	select {
	case st := <-t.states:
		return st
	default:
		return &encodeState{cache: make(map[string][]int, 1024)}
	}
}

// release returns st for reuse; beyond the channel's capacity it is dropped.
func (t *Tokenizer) release(st *encodeState) {
	select {
	case t.states <- st:
	default:
	}
}

// Encode returns the ids of text. Added tokens are recognised wherever they
// occur, special or not, so "<|im_end|>" in text becomes its one id (this is
// what Hugging Face tokenizers do by default). Nothing is prepended or
// appended: tokenizer.json's post_processor (a BOS for Llama 3) is not
// applied, because chat templates write those tokens themselves.
func (t *Tokenizer) Encode(text string) []int { return t.encode(text, &t.all) }

// EncodeOrdinary is Encode without special-token parsing: text that spells
// a special token ("<|im_end|>") is encoded as ordinary text, while
// non-special added tokens (Qwen's "<tool_call>") are still matched. That is
// Hugging Face's split_special_tokens=True. Use it for text that must not
// be able to inject control tokens, such as tool output.
func (t *Tokenizer) EncodeOrdinary(text string) []int { return t.encode(text, &t.ordinary) }

func (t *Tokenizer) encode(text string, m *matchers) []int {
	st := t.state()
	ids := t.appendEncoded(make([]int, 0, len(text)/3+4), text, m, st)
	t.release(st)
	return ids
}

// EncodeBatch encodes texts on all cores; out[i] is Encode(texts[i]).
func (t *Tokenizer) EncodeBatch(texts []string) [][]int {
	out := make([][]int, len(texts))
	workers := min(runtime.GOMAXPROCS(0), len(texts))
	var next sync.Mutex
	pos := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := t.state()
			defer t.release(st)
			for {
				next.Lock()
				i := pos
				pos++
				next.Unlock()
				if i >= len(texts) {
					return
				}
				out[i] = t.appendEncoded(make([]int, 0, len(texts[i])/3+4), texts[i], &t.all, st)
			}
		}()
	}
	wg.Wait()
	return out
}

func (t *Tokenizer) appendEncoded(ids []int, text string, m *matchers, st *encodeState) []int {
	st.outer = m.raw.split(st.outer[:0], text)
	for _, p := range st.outer {
		if p.id >= 0 {
			ids = append(ids, p.id)
			continue
		}
		s := p.text
		if t.normalize != nil {
			s = t.normalize(s)
		}
		if m.norm.empty {
			ids = t.appendText(ids, s, st)
			continue
		}
		st.inner = m.norm.split(st.inner[:0], s)
		for _, q := range st.inner {
			if q.id >= 0 {
				ids = append(ids, q.id)
			} else {
				ids = t.appendText(ids, q.text, st)
			}
		}
	}
	return ids
}

// appendText pre-tokenizes normalized text without added tokens and runs
// BPE on each piece, through the piece cache.
func (t *Tokenizer) appendText(ids []int, s string, st *encodeState) []int {
	for _, p := range preTokenize(t.steps, s, &st.bufs) {
		// One byte is one symbol: nothing to merge, nothing to cache.
		if len(p) == 1 && t.model.byteLevel && t.model.byteIDs[p[0]] >= 0 {
			ids = append(ids, int(t.model.byteIDs[p[0]]))
			continue
		}
		if cached, ok := st.cache[p]; ok {
			ids = append(ids, cached...)
			continue
		}
		n := len(ids)
		ids = t.model.appendPiece(ids, p, st)
		if len(st.cache) >= cacheLimit {
			clear(st.cache)
		}
		// Clone the key: p points into the caller's text.
		st.cache[strings.Clone(p)] = append([]int(nil), ids[n:]...)
	}
	return ids
}

// TokenID returns the id of a token string: an added token's content
// ("<|im_end|>") or a vocabulary entry in its byte-level spelling ("Ġthe").
func (t *Tokenizer) TokenID(token string) (int, bool) {
	if id, ok := t.addedIDs[token]; ok {
		return id, true
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// Token returns the string of id as written in tokenizer.json, or "" when
// no token has that id.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= 0 && id < len(t.special) && t.special[id] }

// VocabSize is one more than the largest id the tokenizer can produce
// (vocabulary and added tokens), the least embedding size that covers it.
// Qwen2.5's 151,665 is less than its models' 151,936 embedding rows.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// AddedTokens returns the added tokens in file order. The slice is shared;
// do not modify it.
func (t *Tokenizer) AddedTokens() []*AddedToken { return t.added }

// Config returns what tokenizer_config.json said (zero values without one).
func (t *Tokenizer) Config() Config { return t.config }

// EOS returns the id of the end-of-sequence token named by
// tokenizer_config.json (Qwen2.5: <|im_end|>).
func (t *Tokenizer) EOS() (int, bool) { return t.namedID(t.config.EOSToken) }

// BOS returns the id of the beginning-of-sequence token (none for Qwen2.5).
func (t *Tokenizer) BOS() (int, bool) { return t.namedID(t.config.BOSToken) }

func (t *Tokenizer) namedID(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	return t.TokenID(s)
}
