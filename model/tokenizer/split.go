package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The Split patterns that the hand-written splitter implements. The Qwen2
// pattern takes one digit per piece, Llama 3 up to three; they are otherwise
// the same alternation:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)   contractions
//	[^\r\n\p{L}\p{N}]?\p{L}+       a word with at most one leading non-letter
//	\p{N} or \p{N}{1,3}            digits
//	 ?[^\s\p{L}\p{N}]+[\r\n]*      punctuation runs with an optional space
//	\s*[\r\n]+                     whitespace up to the last line break
//	\s+(?!\S)                      whitespace that leaves one space for the next word
//	\s+                            any remaining whitespace
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is what a ByteLevel pre-tokenizer with use_regex=true splits by.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// span is a half-open byte range [start, end) of a text.
type span struct{ start, end int }

// matcher finds the non-overlapping matches of a Split pattern, left to right.
// The hand-written splitter and the regexp2 engine both satisfy it, so a
// tokenizer.json with another pattern loads through the same code.
type matcher interface {
	findAll(dst []span, s string) []span
}

// newMatcher picks the engine for a Split pattern: the hand-written splitter
// for the two patterns it implements, regexp2 for any other regex, and a
// literal search for a String pattern.
func newMatcher(regex, literal *string, forceGeneral bool) (matcher, error) {
	switch {
	case regex != nil && *regex == qwen2Pattern && !forceGeneral:
		return wordSplitter{maxDigits: 1}, nil
	case regex != nil && *regex == llama3Pattern && !forceGeneral:
		return wordSplitter{maxDigits: 3}, nil
	case regex != nil:
		// regexp2's default (.NET) mode is used, not its RE2 mode, because RE2
		// mode makes \s ASCII-only while Oniguruma's \s is Unicode White_Space.
		re, err := regexp2.Compile(*regex, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("regex %q: %v", *regex, err)
		}
		return regexMatcher{re}, nil
	case literal != nil:
		if *literal == "" {
			return nil, fmt.Errorf("empty String pattern")
		}
		return literalMatcher(*literal), nil
	}
	return nil, fmt.Errorf("pattern has neither Regex nor String")
}

// wordSplitter is the Qwen2 / Llama 3 pattern written out by hand: at each
// position it tries the alternatives in the regex's order, with the
// backtracking each one would do. It runs several times faster than a
// backtracking engine and needs no lookahead support.
type wordSplitter struct{ maxDigits int }

// Character classes as Oniguruma sees them. Go's unicode.IsSpace is exactly
// the White_Space property that Oniguruma's Unicode \s uses. An invalid
// UTF-8 byte decodes as utf8.RuneError (a symbol), so it falls in "other".
func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isOther(r rune) bool  { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

func (w wordSplitter) findAll(dst []span, s string) []span {
	for i := 0; i < len(s); {
		n := w.matchAt(s, i)
		dst = append(dst, span{i, i + n})
		i += n
	}
	return dst
}

// matchAt returns the length in bytes of the match that starts at i (> 0:
// every rune is a letter, a number, whitespace or other, and each kind has an
// alternative that takes it).
func (w wordSplitter) matchAt(s string, i int) int {
	c, cw := utf8.DecodeRuneInString(s[i:])
	if c == '\'' {
		if n := contractionAt(s[i+1:]); n > 0 {
			return 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(c) {
		return cw + letterRun(s[i+cw:])
	}
	if c != '\r' && c != '\n' && !isNumber(c) {
		if n := letterRun(s[i+cw:]); n > 0 {
			return cw + n
		}
	}
	// \p{N}{1,maxDigits}
	if isNumber(c) {
		j := i + cw
		for k := 1; k < w.maxDigits && j < len(s); k++ {
			r, rw := utf8.DecodeRuneInString(s[j:])
			if !isNumber(r) {
				break
			}
			j += rw
		}
		return j - i
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if c == ' ' {
		j++
	}
	if j < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[j:]); isOther(r) {
			for j < len(s) {
				r, rw := utf8.DecodeRuneInString(s[j:])
				if !isOther(r) {
					break
				}
				j += rw
			}
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j - i
		}
	}
	// c is whitespace here. Find the whitespace run [i, end) and the last
	// line break in it.
	end, lastBreak, lastStart := i, -1, i
	for end < len(s) {
		r, rw := utf8.DecodeRuneInString(s[end:])
		if !isSpace(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastBreak = end
		}
		lastStart = end
		end += rw
	}
	if lastBreak >= 0 { // \s*[\r\n]+ backtracks to the last break
		return lastBreak + 1 - i
	}
	if end == len(s) { // \s+(?!\S) at the end of the text
		return end - i
	}
	if lastStart > i { // \s+(?!\S) gives the last whitespace rune back
		return lastStart - i
	}
	return end - i // \s+
}

// letterRun is the length of the run of letters at the start of s.
func letterRun(s string) int {
	j := 0
	for j < len(s) {
		r, rw := utf8.DecodeRuneInString(s[j:])
		if !isLetter(r) {
			break
		}
		j += rw
	}
	return j
}

// contractionAt matches s|t|re|ve|m|ll|d case-insensitively at the start of
// s and returns its length in bytes, or 0. Case-insensitive means Unicode
// simple case folding, as in Oniguruma: besides ASCII case, U+017F (long s)
// folds to s. No other rune folds to one of these letters.
func contractionAt(s string) int {
	fold := func(k int) (rune, int) {
		if k >= len(s) {
			return 0, 0
		}
		r, rw := utf8.DecodeRuneInString(s[k:])
		if r == 'ſ' {
			return 's', rw
		}
		if r < utf8.RuneSelf {
			return unicode.ToLower(r), rw
		}
		return 0, rw
	}
	r1, w1 := fold(0)
	switch r1 {
	case 's', 't', 'm', 'd':
		return w1
	case 'r', 'v', 'l':
		r2, w2 := fold(w1)
		if (r1 == 'r' || r1 == 'v') && r2 == 'e' || r1 == 'l' && r2 == 'l' {
			return w1 + w2
		}
	}
	return 0
}

// regexMatcher runs any other Split regex through regexp2.
type regexMatcher struct{ re *regexp2.Regexp }

func (m regexMatcher) findAll(dst []span, s string) []span {
	runes := []rune(s)
	// byteAt[k] is the byte offset of rune k; an invalid byte is one rune, as
	// in the []rune conversion above.
	byteAt := make([]int, 0, len(runes)+1)
	for i := range s {
		byteAt = append(byteAt, i)
	}
	byteAt = append(byteAt, len(s))
	match, err := m.re.FindRunesMatch(runes)
	for err == nil && match != nil {
		if match.Length > 0 {
			dst = append(dst, span{byteAt[match.Index], byteAt[match.Index+match.Length]})
		}
		match, err = m.re.FindNextMatch(match)
	}
	// err can only be a timeout, and no timeout is set.
	return dst
}

// literalMatcher splits on a fixed string.
type literalMatcher string

func (m literalMatcher) findAll(dst []span, s string) []span {
	for i := 0; ; {
		k := strings.Index(s[i:], string(m))
		if k < 0 {
			return dst
		}
		dst = append(dst, span{i + k, i + k + len(m)})
		i += k + len(m)
	}
}
