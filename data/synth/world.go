package synth

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/r1go/r1go/data"
)

// DataSource is the data_source of every synthetic sample.
const DataSource = "synthetic"

// Kind is the type of an entity.
type Kind uint8

// The entity kinds. Every kind is the subject of two relations, so a
// question can go on from any entity it reaches.
const (
	Country Kind = iota
	City
	Person
	Company
	Book
	numKinds
)

var kindNames = [numKinds]string{"country", "city", "person", "company", "book"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Relation is a functional relation between two kinds: each subject has
// exactly one object. Name is also the noun of every text about it:
// "the founder of X" in questions and queries, "The founder of X is Y." in
// passages.
type Relation struct {
	Name            string
	Subject, Object Kind
}

// relations lists the relation types, two per subject kind.
var relations = []Relation{
	{"capital", Country, City},
	{"leader", Country, Person},
	{"country", City, Country},
	{"mayor", City, Person},
	{"birthplace", Person, City},
	{"employer", Person, Company},
	{"founder", Company, Person},
	{"headquarters", Company, City},
	{"author", Book, Person},
	{"publisher", Book, Company},
}

// Entity is one named thing of the world.
type Entity struct {
	Name string
	Kind Kind
}

// Fact says that Relation(Subject) = Object; the ints index World.Entities
// and the relation table every world shares (relations).
type Fact struct {
	Subject, Relation, Object int
}

// Config sizes a world. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	Seed uint64 // everything is a function of the seed and the sizes

	// Entities of each kind; at least 1 each, 5000 in all at most.
	Countries, Cities, People, Companies, Books int

	// Questions per split. The test split is drawn first, then validation,
	// then train, so growing Train leaves the evaluation splits unchanged.
	Train, Validation, Test int

	// HopWeights are the relative shares of 2-, 3- and 4-hop questions in
	// every split, e.g. {1, 0, 0} for 2-hop only.
	HopWeights [3]float64

	// FactsPerPassage is how many facts about one entity one passage states
	// (an entity has two; 1 gives one sentence per passage).
	FactsPerPassage int
}

// DefaultConfig is the embedded default: 460 entities, 920 passages,
// 3000 train, 200 validation and 200 test questions.
func DefaultConfig() Config {
	return Config{
		Seed:      1,
		Countries: 20, Cities: 80, People: 200, Companies: 80, Books: 80,
		Train: 3000, Validation: 200, Test: 200,
		HopWeights:      [3]float64{0.4, 0.35, 0.25},
		FactsPerPassage: 1,
	}
}

// maxEntities keeps name generation fast (every name is checked against
// every other for substrings) and far from exhausting the syllable space.
const maxEntities = 5000

func (c *Config) validate() error {
	counts := []struct {
		name string
		n    int
	}{{"Countries", c.Countries}, {"Cities", c.Cities}, {"People", c.People}, {"Companies", c.Companies}, {"Books", c.Books}}
	total := 0
	for _, k := range counts {
		if k.n < 1 {
			return fmt.Errorf("synth: Config.%s = %d, want at least 1", k.name, k.n)
		}
		total += k.n
	}
	if c.Cities < c.Countries {
		return fmt.Errorf("synth: Config.Cities = %d < Config.Countries = %d: every country needs a city for its capital", c.Cities, c.Countries)
	}
	if total > maxEntities {
		return fmt.Errorf("synth: Config asks for %d entities, at most %d", total, maxEntities)
	}
	if c.Train < 0 || c.Validation < 0 || c.Test < 0 {
		return fmt.Errorf("synth: Config split sizes must not be negative (Train %d, Validation %d, Test %d)", c.Train, c.Validation, c.Test)
	}
	sum := 0.0
	for i, w := range c.HopWeights {
		if !(w >= 0) || w > 1e9 {
			return fmt.Errorf("synth: Config.HopWeights[%d] = %v, want a finite weight >= 0", i, w)
		}
		sum += w
	}
	if sum == 0 {
		return errors.New("synth: Config.HopWeights are all 0")
	}
	if c.FactsPerPassage < 1 {
		return fmt.Errorf("synth: Config.FactsPerPassage = %d, want at least 1", c.FactsPerPassage)
	}
	return nil
}

// World is a generated world: its entities, the facts about them, the corpus
// that states the facts, and the question splits.
type World struct {
	Config   Config
	Entities []Entity
	Facts    []Fact
	// Passages is the retrieval corpus, wiki-18 style: ID is the row number,
	// Contents is "\"Title\"\ntext" and Title the subject's name.
	Passages []data.Passage

	Train, Validation, Test []data.Sample

	object   map[[2]int]int    // (subject, relation) -> object
	evidence map[[2]int]string // (subject, relation) -> passage id
}

// Default returns the world of DefaultConfig.
func Default() *World {
	w, err := New(DefaultConfig())
	if err != nil {
		panic(err) // DefaultConfig is valid by construction; a test checks it
	}
	return w
}

// New generates the world of cfg.
func New(cfg Config) (*World, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// One stream for the world and one for the questions, so the corpus
	// does not change when only the split sizes do.
	worldRNG := newRNG(cfg.Seed, 0x5eed_f00d)
	w := &World{Config: cfg, object: map[[2]int]int{}, evidence: map[[2]int]string{}}
	if err := w.makeEntities(worldRNG); err != nil {
		return nil, err
	}
	w.makeFacts(worldRNG)
	w.makePassages(worldRNG)
	if err := w.makeQuestions(newRNG(cfg.Seed, 0x9e57_10e5)); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *World) makeEntities(rng *source) error {
	book := nameBook{rng: rng}
	c := w.Config
	for kind, n := range [numKinds]int{c.Countries, c.Cities, c.People, c.Companies, c.Books} {
		for range n {
			name := book.next()
			if name == "" {
				return fmt.Errorf("synth: ran out of distinct names after %d entities", len(w.Entities))
			}
			w.Entities = append(w.Entities, Entity{Name: name, Kind: Kind(kind)})
		}
	}
	return nil
}

// ofKind lists the indices of the entities of kind k, in order.
func (w *World) ofKind(k Kind) []int {
	var ids []int
	for i, e := range w.Entities {
		if e.Kind == k {
			ids = append(ids, i)
		}
	}
	return ids
}

// makeFacts draws every fact. Objects are dealt from a shuffled deck that
// holds each candidate equally often, not drawn independently: with
// independent draws some cities become the birthplace of many people, and
// a model could score by guessing those popular answers without searching.
func (w *World) makeFacts(rng *source) {
	var byKind [numKinds][]int
	for k := range numKinds {
		byKind[k] = w.ofKind(k)
	}
	// deal returns n objects of kind k, each candidate used n/len or
	// n/len+1 times, in random order.
	deal := func(k Kind, n int) []int {
		ids := byKind[k]
		deck := make([]int, 0, n+len(ids))
		for len(deck) < n {
			extra := append([]int(nil), ids...)
			rng.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
			deck = append(deck, extra...)
		}
		deck = deck[:n]
		rng.Shuffle(n, func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		return deck
	}
	// Cities first: dealing countries over cities gives every country a
	// city (when there are enough cities), so it has a capital inside it.
	cityCountry := map[int]int{}
	citiesOf := map[int][]int{}
	for i, country := range deal(Country, len(byKind[City])) {
		city := byKind[City][i]
		cityCountry[city] = country
		citiesOf[country] = append(citiesOf[country], city)
	}
	for r, rel := range relations {
		subjects := byKind[rel.Subject]
		objects := deal(rel.Object, len(subjects))
		for i, s := range subjects {
			o := objects[i]
			switch rel.Name {
			case "country":
				o = cityCountry[s]
			case "capital":
				cs := citiesOf[s]
				o = cs[rng.IntN(len(cs))]
			}
			w.Facts = append(w.Facts, Fact{Subject: s, Relation: r, Object: o})
			w.object[[2]int{s, r}] = o
		}
	}
}

// sentence states a fact the way passages do.
func (w *World) sentence(f Fact) string {
	return foundSentence(relations[f.Relation].Name+" of "+w.Entities[f.Subject].Name, w.Entities[f.Object].Name)
}

func (w *World) makePassages(rng *source) {
	bySubject := make([][]Fact, len(w.Entities))
	for _, f := range w.Facts {
		bySubject[f.Subject] = append(bySubject[f.Subject], f)
	}
	type draft struct {
		subject int
		facts   []Fact
	}
	var drafts []draft
	for s, facts := range bySubject {
		for len(facts) > 0 {
			n := min(w.Config.FactsPerPassage, len(facts))
			drafts = append(drafts, draft{s, facts[:n]})
			facts = facts[n:]
		}
	}
	// Shuffled, so that a passage id says nothing about its subject.
	rng.Shuffle(len(drafts), func(i, j int) { drafts[i], drafts[j] = drafts[j], drafts[i] })
	for i, d := range drafts {
		id := strconv.Itoa(i)
		title := w.Entities[d.subject].Name
		text := ""
		for j, f := range d.facts {
			if j > 0 {
				text += " "
			}
			text += w.sentence(f)
			w.evidence[[2]int{f.Subject, f.Relation}] = id
		}
		w.Passages = append(w.Passages, data.Passage{ID: id, Title: title, Contents: `"` + title + `"` + "\n" + text})
	}
}

// Object returns relation(subject) by names, and whether the world has that
// fact.
func (w *World) Object(subject, relation string) (string, bool) {
	s, r := -1, -1
	for i, e := range w.Entities {
		if e.Name == subject {
			s = i
			break
		}
	}
	for i, rel := range relations {
		if rel.Name == relation {
			r = i
			break
		}
	}
	o, ok := w.object[[2]int{s, r}]
	if !ok {
		return "", false
	}
	return w.Entities[o].Name, true
}

// Summary describes the world in one line for logs: seed, sizes, and the
// hop mix of each split.
func (w *World) Summary() string {
	mix := func(samples []data.Sample) string {
		var n [MaxHops + 1]int
		for _, s := range samples {
			if s.Gold != nil && len(s.Gold.Steps) <= MaxHops {
				n[len(s.Gold.Steps)]++
			}
		}
		return fmt.Sprintf("%d (%d/%d/%d by 2/3/4 hops)", len(samples), n[2], n[3], n[4])
	}
	return fmt.Sprintf("synthetic world seed %d: %d entities, %d passages; train %s, validation %s, test %s",
		w.Config.Seed, len(w.Entities), len(w.Passages), mix(w.Train), mix(w.Validation), mix(w.Test))
}

// Split returns the samples of the split called name: "train",
// "validation" (or "val", "dev") or "test".
func (w *World) Split(name string) ([]data.Sample, error) {
	switch name {
	case "train":
		return w.Train, nil
	case "validation", "val", "dev":
		return w.Validation, nil
	case "test":
		return w.Test, nil
	}
	return nil, fmt.Errorf("synth: unknown split %q (want train, validation or test)", name)
}
