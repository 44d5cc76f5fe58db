package tokenizer

import "unicode/utf8"

// The GPT-2 byte-level alphabet: every byte gets a printable rune so that a
// byte sequence can be stored as a JSON vocabulary string. Printable Latin-1
// bytes map to themselves; the other 68 bytes (controls, space, 0x7F-0xA0,
// soft hyphen) map, in byte order, to U+0100 upward. The table is built from
// that rule rather than typed in, so a typo cannot hide in it.
var (
	byteToRune [256]rune  // byte -> alphabet rune
	runeToByte [324]int16 // alphabet rune -> byte, -1 for runes outside it (all alphabet runes are < 324)
	byteOrder  [256]byte  // bytes in alphabet order (printable first), the trainer's id order
)

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			byteToRune[b] = rune(b)
			byteOrder[next] = byte(b)
			next++
		}
	}
	extra := 0
	for b := 0; b < 256; b++ {
		if !printable(b) {
			byteToRune[b] = rune(256 + extra)
			byteOrder[next] = byte(b)
			next++
			extra++
		}
	}
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	for b, r := range byteToRune {
		runeToByte[r] = int16(b)
	}
}

// byteLevelString maps raw bytes to their alphabet runes ("hello world" ->
// "helloĠworld").
func byteLevelString(raw string) string {
	buf := make([]byte, 0, 2*len(raw))
	for i := 0; i < len(raw); i++ {
		buf = utf8.AppendRune(buf, byteToRune[raw[i]])
	}
	return string(buf)
}

// appendByteLevelDecoded appends the raw bytes a vocabulary token stands for.
// As the Hugging Face ByteLevel decoder does, a token holding any rune outside
// the alphabet (an added token such as "<tool call>" with a real space) is
// taken verbatim.
func appendByteLevelDecoded(dst []byte, token string) []byte {
	start := len(dst)
	for _, r := range token {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:start], token...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}
