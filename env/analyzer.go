package env

import (
	"unicode"
	"unicode/utf8"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
)

// AnalyzerConfig says how text becomes index terms. The default follows
// Lucene's EnglishAnalyzer, which Pyserini's BM25 indexes of wiki-18 use:
// lowercase, English possessive "'s" dropped, Lucene's 33 English stop
// words dropped, Porter stemming.
type AnalyzerConfig struct {
	NoStem      bool `json:"no_stem"`
	NoStopWords bool `json:"no_stop_words"`
}

// maxTermBytes drops longer tokens, as Lucene's StandardTokenizer does
// past 255 characters; such tokens are junk (URLs, base64) in Wikipedia.
const maxTermBytes = 255

// lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
var englishStopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true,
	"by": true, "for": true, "if": true, "in": true, "into": true, "is": true, "it": true, "no": true,
	"not": true, "of": true, "on": true, "or": true, "such": true, "that": true, "the": true,
	"their": true, "then": true, "there": true, "these": true, "they": true, "this": true, "to": true,
	"was": true, "will": true, "with": true,
}

// analyzer turns text into terms. It caches stems, so it is not safe for
// concurrent use: each goroutine owns one.
type analyzer struct {
	cfg   AnalyzerConfig
	stems map[string]string
	buf   []byte
}

const maxStemCache = 1 << 20

func newAnalyzer(cfg AnalyzerConfig) *analyzer {
	return &analyzer{cfg: cfg, stems: make(map[string]string, 1<<14), buf: make([]byte, 0, 64)}
}

func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r)
}

// terms calls emit for every term of text, in order. The string passed to
// emit is shared and stays valid (it comes from the stem cache).
func (a *analyzer) terms(text string, emit func(string)) {
	buf := a.buf[:0]
	flush := func() {
		if len(buf) > 0 && len(buf) <= maxTermBytes {
			a.emitToken(buf, emit)
		}
		buf = buf[:0]
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				buf = append(buf, c)
			case 'A' <= c && c <= 'Z':
				buf = append(buf, c+'a'-'A')
			case c == '\'' && len(buf) > 0 && possessiveAt(text, i+1):
				flush()
				i += 2 // skip "'s"
				continue
			default:
				flush()
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\u2019' && len(buf) > 0 && possessiveAt(text, i+size):
			flush()
			i += size + 1
			continue
		case isTokenRune(r):
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		default:
			flush()
		}
		i += size
	}
	flush()
	a.buf = buf
}

// possessiveAt says whether text[i:] is "s" or "S" ending a word.
func possessiveAt(text string, i int) bool {
	if i >= len(text) || (text[i] != 's' && text[i] != 'S') {
		return false
	}
	if i+1 == len(text) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(text[i+1:])
	return !isTokenRune(r)
}

func (a *analyzer) emitToken(tok []byte, emit func(string)) {
	if s, ok := a.stems[string(tok)]; ok { // no allocation on a hit
		if s != "" {
			emit(s)
		}
		return
	}
	key := string(tok)
	stem := key
	if !a.cfg.NoStopWords && englishStopWords[key] {
		stem = ""
	} else if !a.cfg.NoStem && isASCII(tok) {
		// Porter's rules are for English; other scripts stay as they are.
		stem = porterstemmer.StemString(key)
	}
	if len(a.stems) >= maxStemCache {
		clear(a.stems)
	}
	a.stems[key] = stem
	if stem != "" {
		emit(stem)
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Analyze returns the terms of text; for tests and debugging.
func (c AnalyzerConfig) Analyze(text string) []string {
	var out []string
	newAnalyzer(c).terms(text, func(s string) { out = append(out, s) })
	return out
}
