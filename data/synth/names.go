package synth

import (
	"math/rand/v2"
	"strings"
)

// Names are built from consonant-vowel(-coda) syllables. The inventory is
// small on purpose: a byte-level BPE tokenizer with a few hundred merges
// learns the syllables, so a name costs two to four tokens and a tiny model
// can copy it from a passage into a query or an answer.
var (
	onsets = []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"}
	nuclei = []string{"a", "e", "i", "o", "u"}
	codas  = []string{"", "", "", "n", "r", "l", "s", "m"} // open syllables twice as likely
)

// syllable draws one syllable.
func syllable(rng *rand.Rand) string {
	return onsets[rng.IntN(len(onsets))] + nuclei[rng.IntN(len(nuclei))] + codas[rng.IntN(len(codas))]
}

// nameBook hands out names that are unique, are no substring of one another
// (the SubEM reward would otherwise accept "Tazo" inside "Tazomir"), and
// collide with no word of the templates.
type nameBook struct {
	rng   *rand.Rand
	taken []string // lower case
}

// reserved holds every word the templates use, lower case; a name equal to
// one of them would make a question ambiguous to the tokenizer and to BM25.
var reserved = map[string]bool{}

func init() {
	for _, r := range relations {
		for _, w := range strings.Fields(r.Name) {
			reserved[w] = true
		}
	}
	for _, w := range strings.Fields(templateWords) {
		reserved[w] = true
	}
}

// templateWords lists the words of the fixed texts (questions, passages,
// thoughts).
const templateWords = "the of is who what i need now so answer a an"

// maxNameTries bounds the draws for one name; Config.validate keeps the
// number of entities far below what would exhaust the syllable space.
const maxNameTries = 100000

// next returns a fresh name of 2 or 3 syllables, capitalised, or "" when
// maxNameTries draws all clashed.
func (b *nameBook) next() string {
	for range maxNameTries {
		n := 2 + b.rng.IntN(2)
		var sb strings.Builder
		for range n {
			sb.WriteString(syllable(b.rng))
		}
		lower := sb.String()
		if len(lower) < 4 || reserved[lower] || b.clashes(lower) {
			continue
		}
		b.taken = append(b.taken, lower)
		return strings.ToUpper(lower[:1]) + lower[1:]
	}
	return ""
}

// clashes reports whether name contains, or is contained in, a name already
// given out.
func (b *nameBook) clashes(name string) bool {
	for _, t := range b.taken {
		if strings.Contains(t, name) || strings.Contains(name, t) {
			return true
		}
	}
	return false
}
