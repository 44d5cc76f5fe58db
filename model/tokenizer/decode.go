package tokenizer

import "unicode/utf8"

// Decode returns the exact bytes the ids stand for, concatenated. The
// result can hold invalid UTF-8: a token may end inside a character, and
// Encode of invalid UTF-8 gives tokens for the raw bytes, so
// Decode(Encode(s)) returns s byte for byte whenever s is already in the
// normalizer's form (NFC for Qwen2.5). Ids that name no token are skipped,
// as in Hugging Face tokenizers. Use DecodeText for the text Python's
// tokenizer.decode shows.
func (t *Tokenizer) Decode(ids []int) string {
	return string(t.appendDecoded(nil, ids))
}

// DecodeText is Decode with every ill-formed UTF-8 sequence replaced by
// U+FFFD, one per maximal subpart (the Unicode and WHATWG rule, which Rust's
// String::from_utf8_lossy and JavaScript's TextDecoder both follow). It is
// what Hugging Face's decode returns with skip_special_tokens=False.
func (t *Tokenizer) DecodeText(ids []int) string {
	return string(appendValidUTF8(nil, t.appendDecoded(nil, ids)))
}

// StripSpecial returns ids without the added tokens marked special;
// DecodeText(StripSpecial(ids)) is Hugging Face's
// decode(ids, skip_special_tokens=True). Non-special added tokens such as
// Qwen's <tool_call> stay.
func (t *Tokenizer) StripSpecial(ids []int) []int {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if !t.IsSpecial(id) {
			out = append(out, id)
		}
	}
	return out
}

func (t *Tokenizer) appendDecoded(dst []byte, ids []int) []byte {
	for _, id := range ids {
		if id >= 0 && id < len(t.raw) {
			dst = append(dst, t.raw[id]...)
		}
	}
	return dst
}

// utf8Need returns how many bytes the sequence led by b needs and the range
// its second byte must fall in; need is 0 for a byte that cannot lead.
func utf8Need(b byte) (need int, lo, hi byte) {
	switch {
	case b < 0x80:
		return 1, 0, 0
	case b >= 0xC2 && b <= 0xDF:
		return 2, 0x80, 0xBF
	case b == 0xE0:
		return 3, 0xA0, 0xBF
	case b == 0xED:
		return 3, 0x80, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		return 3, 0x80, 0xBF
	case b == 0xF0:
		return 4, 0x90, 0xBF
	case b >= 0xF1 && b <= 0xF3:
		return 4, 0x80, 0xBF
	case b == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// validPrefix returns how many leading bytes of b start a well-formed
// sequence, and how many that sequence needs in all.
func validPrefix(b []byte) (have, need int) {
	need, lo, hi := utf8Need(b[0])
	switch need {
	case 0: // cannot lead: a subpart of one byte
		return 0, 1
	case 1:
		return 1, 1
	}
	have = 1
	for have < need && have < len(b) {
		c := b[have]
		if have == 1 && (c < lo || c > hi) || have > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
		have++
	}
	return have, need
}

// appendValidUTF8 appends b with each maximal ill-formed subpart replaced
// by U+FFFD.
func appendValidUTF8(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		have, need := validPrefix(b[i:])
		if have == need {
			dst = append(dst, b[i:i+have]...)
			i += have
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += max(have, 1)
	}
	return dst
}

// StreamDecoder turns ids into text as they are sampled. It holds back the
// bytes of a character that is not complete yet, so no chunk ever ends in
// half a character, and the chunks joined are DecodeText of all ids.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder starts a stream decoder.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends ids and returns the text they complete (possibly "").
func (d *StreamDecoder) Add(ids ...int) string {
	d.pending = d.t.appendDecoded(d.pending, ids)
	cut := len(d.pending)
	// A character is at most 4 bytes, so an incomplete one starts in the
	// last 3 bytes.
	for back := 1; back <= 3 && back <= len(d.pending); back++ {
		i := len(d.pending) - back
		if b := d.pending[i]; b&0xC0 == 0x80 {
			continue // a continuation byte: look further back for the lead
		}
		if have, need := validPrefix(d.pending[i:]); have == back && have < need {
			cut = i
		}
		break
	}
	out := string(appendValidUTF8(nil, d.pending[:cut]))
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns the held-back bytes, an incomplete character becoming
// U+FFFD, and resets the decoder.
func (d *StreamDecoder) Flush() string {
	out := string(appendValidUTF8(nil, d.pending))
	d.pending = d.pending[:0]
	return out
}
