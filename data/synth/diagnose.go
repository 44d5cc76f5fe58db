package synth

import (
	"fmt"
	"regexp"
	"strings"
)

// Where an agent leaves a question's chain. A question names its chain of
// relations ("the mayor of the headquarters of the publisher of X": the
// publisher of X first), each search should ask for the chain's next
// relation of what the search before found, and the answer is what the
// last one found. Diagnose names the first step that departs from that, so
// that a learning run's failures can be counted by kind: a policy that
// miscopies names needs another cure than one that reads the wrong
// relation off the question or stops searching early.

// The kinds of a Verdict.
const (
	Right         = "right"
	WrongRelation = "wrong relation"  // a search asks for another relation than the chain's next
	MiscopiedName = "miscopied name"  // a search names another entity than the one the search before found
	StoppedEarly  = "stopped early"   // answered before the chain's last search
	PastTheChain  = "past the chain"  // searched again after the chain's last search
	WrongAnswer   = "wrong answer"    // searched the whole chain, then answered something else
	Unreadable    = "unreadable call" // a tool call without a search query of the form "RELATION of NAME"
)

// Verdict is where a trajectory left its question's chain: Kind, at search
// Hop (1-based; for StoppedEarly the searches made, for WrongAnswer and
// Right the chain's length), on a question of Hops searches.
type Verdict struct {
	Kind string
	Hop  int
	Hops int
}

func (v Verdict) String() string {
	switch v.Kind {
	case Right, WrongAnswer:
		return v.Kind
	case StoppedEarly:
		return fmt.Sprintf("%s after %d searches", v.Kind, v.Hop)
	}
	return fmt.Sprintf("%s at search %d", v.Kind, v.Hop)
}

// ParseQuestion reads a synthetic question back into its start entity and
// its relations in the order they are searched.
func ParseQuestion(q string) (start string, relations []string, err error) {
	body, ok := strings.CutPrefix(q, "What is the ")
	if !ok {
		body, ok = strings.CutPrefix(q, "Who is the ")
	}
	body, ok2 := strings.CutSuffix(body, "?")
	if !ok || !ok2 {
		return "", nil, fmt.Errorf("synth: %q is not a synthetic question (\"What/Who is the R of ... of NAME?\")", q)
	}
	parts := strings.Split(body, " of the ")
	last := parts[len(parts)-1]
	i := strings.LastIndex(last, " of ")
	if i < 0 {
		return "", nil, fmt.Errorf("synth: question %q names no start entity", q)
	}
	parts[len(parts)-1], start = last[:i], last[i+len(" of "):]
	for k := len(parts) - 1; k >= 0; k-- {
		relations = append(relations, parts[k])
	}
	// The world's relations and names are single words.
	for _, w := range append([]string{start}, relations...) {
		if w == "" || strings.ContainsAny(w, " \t\n") {
			return "", nil, fmt.Errorf("synth: question %q has %q where a relation or a name goes", q, w)
		}
	}
	return start, relations, nil
}

var (
	queryArg = regexp.MustCompile(`"query"\s*:\s*"([^"]*)"`)
	// a passage's sentence: "The founder of Tazomir is Belovan."
	factSentence = regexp.MustCompile(`The (\w+) of (\S+) is ([^.\s]+)\.`)
)

// Diagnose judges one trajectory on question q: its tool calls' bodies and
// the observations that answered them, in order, and whether its answer
// was right (a right answer is Right however it was reached). A search's
// result is read from its observation's sentence for the searched pair,
// so the verdict needs no world; the i-th observation is taken as the i-th
// call's, as it is with one tool call run a turn (env.max_parallel_calls
// 1, the default).
func Diagnose(q string, calls, observations []string, right bool) (Verdict, error) {
	start, rels, err := ParseQuestion(q)
	if err != nil {
		return Verdict{}, err
	}
	if right {
		return Verdict{Right, len(rels), len(rels)}, nil
	}
	cur := start
	for i, call := range calls {
		m := queryArg.FindStringSubmatch(call)
		if m == nil {
			return Verdict{Unreadable, i + 1, len(rels)}, nil
		}
		rel, name, ok := strings.Cut(m[1], " of ")
		if !ok {
			return Verdict{Unreadable, i + 1, len(rels)}, nil
		}
		switch {
		case i >= len(rels):
			return Verdict{PastTheChain, i + 1, len(rels)}, nil
		case rel != rels[i]:
			return Verdict{WrongRelation, i + 1, len(rels)}, nil
		case name != cur:
			return Verdict{MiscopiedName, i + 1, len(rels)}, nil
		}
		cur = ""
		if i < len(observations) {
			for _, f := range factSentence.FindAllStringSubmatch(observations[i], -1) {
				if f[1] == rel && f[2] == name {
					cur = f[3]
					break
				}
			}
		}
	}
	if len(calls) < len(rels) {
		return Verdict{StoppedEarly, len(calls), len(rels)}, nil
	}
	return Verdict{WrongAnswer, len(rels), len(rels)}, nil
}
