package env

import (
	"strings"
	"unicode"
)

// This file reproduces the SQuAD/HotpotQA answer normalisation exactly as
// Python evaluates it: str.lower (full case mapping, final sigma),
// string.punctuation (ASCII only), re.sub(r"\b(a|an|the)\b", " ") with
// Python's Unicode \b, and " ".join(str.split()). Go's RE2 \b is ASCII-only
// and strings.Fields misses \x1c-\x1f, so neither is used.

// NormalizeAnswer lowercases, drops ASCII punctuation, drops the articles
// a/an/the as whole words, and collapses whitespace.
func NormalizeAnswer(s string) string {
	s = pyLower(s)
	s = strings.Map(func(r rune) rune {
		if r < 128 && isASCIIPunct(byte(r)) {
			return -1
		}
		return r
	}, s)
	s = removeArticles(s)
	return strings.Join(pyFields(s), " ")
}

func isASCIIPunct(c byte) bool {
	return strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0
}

// isPyWord is Python re's \w for str patterns: alphanumeric (letters, and
// numbers of any kind) or underscore. Combining marks are not word
// characters, so "the\u0300" still loses "the".
func isPyWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// isPySpace is Python's str.isspace: Unicode white space plus the ASCII
// information separators \x1c-\x1f.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyFields is Python's str.split() with no argument.
func pyFields(s string) []string { return strings.FieldsFunc(s, isPySpace) }

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// removeArticles replaces every maximal run of word characters equal to
// a, an or the with one space: a match of \b(a|an|the)\b can only be such
// a run, because a, n, t, h, e are all word characters.
func removeArticles(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	start := -1 // byte offset of the current word run
	flush := func(end int) {
		w := s[start:end]
		if w == "a" || w == "an" || w == "the" {
			b.WriteByte(' ')
		} else {
			b.WriteString(w)
		}
		start = -1
	}
	for i, r := range s {
		if isPyWord(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			flush(i)
		}
		b.WriteRune(r)
	}
	if start >= 0 {
		flush(len(s))
	}
	return b.String()
}

// pyLower is Python's str.lower: Unicode full lowercase mapping. It differs
// from strings.ToLower in two places: U+0130 becomes "i\u0307", and a
// capital sigma at the end of a word becomes final sigma.
func pyLower(s string) string {
	simple := true
	for _, r := range s {
		if r == 0x130 || r == 0x3a3 {
			simple = false
			break
		}
	}
	if simple {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i, r := range rs {
		switch {
		case r == 0x130:
			b.WriteString("i\u0307")
		case r == 0x3a3 && finalSigma(rs, i):
			b.WriteRune('ς')
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma is Unicode's Final_Sigma condition as CPython applies it: a
// cased letter before (skipping case-ignorable characters) and none after.
func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !cased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && caseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !cased(rs[j])
}

func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '^', '`', 0xb7, 0x2018, 0x2019, 0x2024, 0xfe52, 0xff07, 0xff0e:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// ExactMatch is 1 when the normalised prediction equals a normalised gold.
func ExactMatch(pred string, golds []string) float64 {
	p := NormalizeAnswer(pred)
	for _, g := range golds {
		if NormalizeAnswer(g) == p {
			return 1
		}
	}
	return 0
}

// CoverEM ("substring EM", Agent-R1's subem_check) is 1 when a normalised
// gold is a substring of the normalised prediction. An empty gold covers
// everything, as in Python.
func CoverEM(pred string, golds []string) float64 {
	p := NormalizeAnswer(pred)
	for _, g := range golds {
		if strings.Contains(p, NormalizeAnswer(g)) {
			return 1
		}
	}
	return 0
}

// F1 is the HotpotQA token F1, the maximum over the gold answers; yes, no
// and noanswer only score when they match exactly.
func F1(pred string, golds []string) float64 {
	best := 0.0
	p := NormalizeAnswer(pred)
	for _, g := range golds {
		if f := f1Normalized(p, NormalizeAnswer(g)); f > best {
			best = f
		}
	}
	return best
}

func f1Normalized(p, g string) float64 {
	if p != g && (isYesNo(p) || isYesNo(g)) {
		return 0
	}
	pt, gt := strings.Split(p, " "), strings.Split(g, " ")
	if p == "" {
		pt = nil
	}
	if g == "" {
		gt = nil
	}
	counts := make(map[string]int, len(gt))
	for _, t := range gt {
		counts[t]++
	}
	same := 0
	for _, t := range pt {
		if counts[t] > 0 {
			counts[t]--
			same++
		}
	}
	if same == 0 {
		return 0
	}
	prec := float64(same) / float64(len(pt))
	rec := float64(same) / float64(len(gt))
	return 2 * prec * rec / (prec + rec)
}

func isYesNo(s string) bool { return s == "yes" || s == "no" || s == "noanswer" }
