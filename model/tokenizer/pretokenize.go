package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a text segment before it is split. Only the Unicode
// forms and lower-casing are supported; tokenizer.json files name others,
// and loading one fails with a clear error instead of tokenizing wrongly.
type normalizer func(string) string

func normalizerFor(kind string) (normalizer, bool) {
	switch kind {
	case "NFC":
		return norm.NFC.String, true
	case "NFD":
		return norm.NFD.String, true
	case "NFKC":
		return norm.NFKC.String, true
	case "NFKD":
		return norm.NFKD.String, true
	case "Lowercase":
		return strings.ToLower, true
	}
	return nil, false
}

func chainNormalizers(steps []normalizer) normalizer {
	if len(steps) == 1 {
		return steps[0]
	}
	return func(s string) string {
		for _, step := range steps {
			s = step(s)
		}
		return s
	}
}

// splitBehavior says what a Split pre-tokenizer does with its matches, as
// in the Hugging Face SplitDelimiterBehavior.
type splitBehavior int

const (
	splitIsolated splitBehavior = iota
	splitRemoved
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

var splitBehaviors = map[string]splitBehavior{
	"Isolated":           splitIsolated,
	"Removed":            splitRemoved,
	"MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext":     splitMergedWithNext,
	"Contiguous":         splitContiguous,
}

// preStep is one pre-tokenizer of a Sequence: it cuts a piece into smaller
// pieces.
type preStep interface {
	split(dst []string, piece string, scratch []span) ([]string, []span)
}

// splitStep is a Split pre-tokenizer.
type splitStep struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

// segment is a match or the text between matches.
type segment struct {
	span
	isMatch bool
}

func (st splitStep) split(dst []string, piece string, scratch []span) ([]string, []span) {
	matches := st.m.findAll(scratch[:0], piece)
	if st.behavior == splitIsolated {
		// The fast path for every byte-level BPE in use: matches and the gaps
		// between them each become a piece.
		at := 0
		for _, m := range matches {
			if m.start > at {
				dst = append(dst, piece[at:m.start])
			}
			dst = append(dst, piece[m.start:m.end])
			at = m.end
		}
		if at < len(piece) {
			dst = append(dst, piece[at:])
		}
		return dst, matches
	}
	var segs []segment
	at := 0
	for _, m := range matches {
		if m.start > at {
			segs = append(segs, segment{span{at, m.start}, st.invert})
		}
		segs = append(segs, segment{m, !st.invert})
		at = m.end
	}
	if at < len(piece) {
		segs = append(segs, segment{span{at, len(piece)}, st.invert})
	}
	var out []span
	switch st.behavior {
	case splitRemoved:
		for _, sg := range segs {
			if !sg.isMatch {
				out = append(out, sg.span)
			}
		}
	case splitMergedWithPrevious:
		prevMatch := false
		for _, sg := range segs {
			if sg.isMatch && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sg.end
			} else {
				out = append(out, sg.span)
			}
			prevMatch = sg.isMatch
		}
	case splitMergedWithNext:
		prevMatch := false
		for k := len(segs) - 1; k >= 0; k-- {
			sg := segs[k]
			if sg.isMatch && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sg.start
			} else {
				out = append(out, sg.span)
			}
			prevMatch = sg.isMatch
		}
		for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
			out[a], out[b] = out[b], out[a]
		}
	case splitContiguous:
		prevMatch := false
		for k, sg := range segs {
			if k > 0 && sg.isMatch == prevMatch {
				out[len(out)-1].end = sg.end
			} else {
				out = append(out, sg.span)
			}
			prevMatch = sg.isMatch
		}
	}
	for _, sp := range out {
		dst = append(dst, piece[sp.start:sp.end])
	}
	return dst, matches
}

// byteLevelStep is the splitting part of a ByteLevel pre-tokenizer: the
// optional prefix space and the optional GPT-2 regex. Mapping bytes to the
// byte-level alphabet is done by the model (see bpe.go), so a ByteLevel
// pre-tokenizer with neither option adds no step at all.
type byteLevelStep struct {
	addPrefixSpace bool
	regex          matcher // nil unless use_regex
}

func (st byteLevelStep) split(dst []string, piece string, scratch []span) ([]string, []span) {
	if st.addPrefixSpace && !strings.HasPrefix(piece, " ") {
		piece = " " + piece
	}
	if st.regex == nil {
		return append(dst, piece), scratch
	}
	return splitStep{m: st.regex}.split(dst, piece, scratch)
}

// preTokenize runs the steps over one normalized segment.
func preTokenize(steps []preStep, text string, bufs *pieceBuffers) []string {
	cur := append(bufs.a[:0], text)
	for _, st := range steps {
		next := bufs.b[:0]
		for _, p := range cur {
			next, bufs.spans = st.split(next, p, bufs.spans)
		}
		bufs.a, bufs.b = next, cur
		cur = next
	}
	return cur
}

// pieceBuffers are reused between calls by one encoding goroutine.
type pieceBuffers struct {
	a, b  []string
	spans []span
}
