package synth

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/r1go/r1go/data"
)

// MinHops and MaxHops bound the length of a question's relation chain.
const (
	MinHops = 2
	MaxHops = 4
)

// chain is a question before it is worded: a start entity and the relations
// followed from it, with the entity each hop reaches (entities[0] = start).
type chain struct {
	relations []int
	entities  []int
}

// chains lists every chain of exactly hops relations whose entities are all
// distinct (so "the country of the capital of X" can never answer X, which
// the question names), in a fixed order.
func (w *World) chains(hops int) []chain {
	var out []chain
	var walk func(rels, ents []int)
	walk = func(rels, ents []int) {
		if len(rels) == hops {
			out = append(out, chain{append([]int(nil), rels...), append([]int(nil), ents...)})
			return
		}
		cur := ents[len(ents)-1]
		for r, rel := range relations {
			if rel.Subject != w.Entities[cur].Kind {
				continue
			}
			next := w.object[[2]int{cur, r}]
			if contains(ents, next) {
				continue
			}
			walk(append(rels, r), append(ents, next))
		}
	}
	for e := range w.Entities {
		walk(nil, []int{e})
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// hopCounts splits n questions over 2..4 hops by weight, rounding by the
// largest remainder so the counts sum to n.
func hopCounts(n int, weights [3]float64) [3]int {
	sum := weights[0] + weights[1] + weights[2]
	var counts [3]int
	var rema [3]float64
	left := n
	for i, w := range weights {
		exact := float64(n) * w / sum
		counts[i] = int(math.Floor(exact))
		rema[i] = exact - float64(counts[i])
		left -= counts[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range rema {
			if rema[i] > rema[best] {
				best = i
			}
		}
		counts[best]++
		rema[best] = -1
	}
	return counts
}

func (w *World) makeQuestions(rng *source) error {
	var pools [3][]chain
	for i := range pools {
		pools[i] = w.chains(MinHops + i)
		rng.Shuffle(len(pools[i]), func(a, b int) { pools[i][a], pools[i][b] = pools[i][b], pools[i][a] })
	}
	splits := []struct {
		name string
		n    int
		dst  *[]data.Sample
	}{{"test", w.Config.Test, &w.Test}, {"validation", w.Config.Validation, &w.Validation}, {"train", w.Config.Train, &w.Train}}
	var used [3]int
	for _, sp := range splits {
		counts := hopCounts(sp.n, w.Config.HopWeights)
		var picked []chain
		for i, c := range counts {
			if used[i]+c > len(pools[i]) {
				return fmt.Errorf("synth: the world has %d distinct %d-hop questions, the splits ask for %d; raise the entity counts or lower the split sizes",
					len(pools[i]), MinHops+i, used[i]+c)
			}
			picked = append(picked, pools[i][used[i]:used[i]+c]...)
			used[i] += c
		}
		// Mix the hop counts within the split, so the first batches are
		// not all 2-hop.
		rng.Shuffle(len(picked), func(a, b int) { picked[a], picked[b] = picked[b], picked[a] })
		samples := make([]data.Sample, len(picked))
		for i, c := range picked {
			samples[i] = w.sample(sp.name, i, c)
		}
		*sp.dst = samples
	}
	return nil
}

// phrase is "the r_k of the r_k-1 of ... the r_1 of Start".
func (w *World) phrase(c chain) string {
	var b strings.Builder
	for i := len(c.relations) - 1; i >= 0; i-- {
		b.WriteString("the ")
		b.WriteString(relations[c.relations[i]].Name)
		b.WriteString(" of ")
	}
	b.WriteString(w.Entities[c.entities[0]].Name)
	return b.String()
}

// question words a chain: "Who is ...?" when the answer is a person,
// "What is ...?" otherwise.
func (w *World) question(c chain) string {
	head := "What is "
	if w.Entities[c.entities[len(c.entities)-1]].Kind == Person {
		head = "Who is "
	}
	return head + w.phrase(c) + "?"
}

// gold is the gold trajectory of a chain: one search per hop, each query
// naming what the hop before found.
func (w *World) gold(c chain) *data.Trajectory {
	name := func(i int) string { return w.Entities[c.entities[i]].Name }
	rel := func(i int) string { return relations[c.relations[i]].Name }
	t := &data.Trajectory{}
	for i := range c.relations {
		thought := "I need the " + rel(i) + " of " + name(i) + "."
		if i > 0 {
			thought = foundSentence(t.Steps[i-1].Query, name(i)) + " Now " + thought
		}
		t.Steps = append(t.Steps, data.Step{
			Thought:  thought,
			Query:    rel(i) + " of " + name(i),
			Evidence: w.evidence[[2]int{c.entities[i], c.relations[i]}],
			Found:    name(i + 1),
		})
	}
	k := len(c.relations)
	t.Answer = name(k)
	t.FinalThought = answerThought(t.Steps[k-1].Query, name(k))
	return t
}

// foundSentence states a fact in the one wording passages and thoughts
// share: "The founder of Tazomir is Belovan." (query names the relation and
// the subject, as the gold search queries do).
func foundSentence(query, found string) string { return "The " + query + " is " + found + "." }

// answerThought is the reasoning of a final turn that answers with what the
// last search, for query, found.
func answerThought(query, found string) string {
	return foundSentence(query, found) + " So the answer is " + found + "."
}

func (w *World) sample(split string, i int, c chain) data.Sample {
	rels := make([]string, len(c.relations))
	for j, r := range c.relations {
		rels[j] = relations[r].Name
	}
	answer := w.Entities[c.entities[len(c.entities)-1]].Name
	return data.Sample{
		ID:         DataSource + ":" + split + "-" + strconv.Itoa(i),
		DataSource: DataSource,
		Question:   w.question(c),
		Answers:    []string{answer},
		Extra: map[string]string{
			"split":     split,
			"hops":      strconv.Itoa(len(c.relations)),
			"relations": strings.Join(rels, ","),
			"start":     w.Entities[c.entities[0]].Name,
		},
		Gold: w.gold(c),
	}
}
