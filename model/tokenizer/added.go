package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's "added_tokens": a literal string
// matched in the text before pre-tokenization and given one id.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"` // match only when not inside a word
	LStrip     bool   `json:"lstrip"`      // the token swallows whitespace on its left
	RStrip     bool   `json:"rstrip"`      // ... and on its right
	Normalized bool   `json:"normalized"`  // matched in the normalized text, not the raw one
	Special    bool   `json:"special"`     // a control token (<|im_end|>); Ordinary encoding ignores it
}

// addedMatcher finds added tokens leftmost-longest, like the Aho-Corasick
// automaton (MatchKind::LeftmostLongest) of Hugging Face tokenizers. Added
// vocabularies hold tens to hundreds of entries, so candidates indexed by
// first byte and tried longest first are as fast and much simpler.
type addedMatcher struct {
	byFirst [256][]*AddedToken
	empty   bool
}

func newAddedMatcher(tokens []*AddedToken, keep func(*AddedToken) bool) *addedMatcher {
	m := &addedMatcher{empty: true}
	for _, t := range tokens {
		if t.Content == "" || !keep(t) {
			continue
		}
		m.byFirst[t.Content[0]] = append(m.byFirst[t.Content[0]], t)
		m.empty = false
	}
	for _, list := range m.byFirst {
		sort.SliceStable(list, func(i, j int) bool { return len(list[i].Content) > len(list[j].Content) })
	}
	return m
}

// piece is a stretch of text to tokenize, or an added token's id when id >= 0.
type piece struct {
	text string
	id   int
}

// split cuts s into text stretches and added tokens, appending to dst.
func (m *addedMatcher) split(dst []piece, s string) []piece {
	if m.empty {
		return append(dst, piece{s, -1})
	}
	textStart := 0
	for i := 0; i < len(s); {
		cands := m.byFirst[s[i]]
		var hit *AddedToken
		for _, t := range cands {
			if len(s)-i >= len(t.Content) && s[i:i+len(t.Content)] == t.Content {
				if t.SingleWord && (endsWithWordRune(s[:i]) || startsWithWordRune(s[i+len(t.Content):])) {
					continue
				}
				hit = t
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		start, stop := i, i+len(hit.Content)
		if hit.LStrip {
			for start > textStart {
				r, w := utf8.DecodeLastRuneInString(s[textStart:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= w
			}
		}
		if hit.RStrip {
			for stop < len(s) {
				r, w := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += w
			}
		}
		if start > textStart {
			dst = append(dst, piece{s[textStart:start], -1})
		}
		dst = append(dst, piece{"", hit.ID})
		textStart, i = stop, stop
	}
	if textStart < len(s) {
		dst = append(dst, piece{s[textStart:], -1})
	}
	return dst
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

func endsWithWordRune(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordRune(r)
}

func startsWithWordRune(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordRune(r)
}
