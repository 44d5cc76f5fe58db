package synth

import (
	"strings"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
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
func syllable(rng *source) string {
	return onsets[rng.IntN(len(onsets))] + nuclei[rng.IntN(len(nuclei))] + codas[rng.IntN(len(codas))]
}

// nameBook hands out names that are unique, are no substring of one another
// (the SubEM reward would otherwise accept "Tazo" inside "Tazomir"), and
// stay distinct from one another and from every template word after Porter
// stemming, which a Lucene-English BM25 analyzer applies ("Kamanal" and
// "Kamanic" both stem to "kaman").
type nameBook struct {
	rng   *source
	taken []string        // lower case
	stems map[string]bool // stems of the names taken
}

// reserved holds the stems of every word the templates use and of Lucene's
// English stop words; a name with one of them as its stem would make a
// question ambiguous to the tokenizer and to BM25.
var reserved = map[string]bool{}

func init() {
	words := templateWords + " " + luceneStopWords
	for _, r := range relations {
		words += " " + r.Name
	}
	for _, w := range strings.Fields(words) {
		reserved[porterstemmer.StemString(w)] = true
	}
}

// templateWords lists the words of the fixed texts (questions, passages,
// thoughts).
const templateWords = "the of is who what i need now so answer"

// luceneStopWords is Lucene's English stop word set.
const luceneStopWords = "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with"

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
		stem := porterstemmer.StemString(lower)
		if len(lower) < 4 || reserved[stem] || b.stems[stem] || b.clashes(lower) {
			continue
		}
		if b.stems == nil {
			b.stems = map[string]bool{}
		}
		b.stems[stem] = true
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
