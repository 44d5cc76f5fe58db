package synth

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseQuestion reads every test question of the default world back
// into the start entity and relations the world made it from.
func TestParseQuestion(t *testing.T) {
	w := Default()
	test, err := w.Split("test")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range test {
		start, rels, err := ParseQuestion(s.Question)
		if err != nil {
			t.Fatal(err)
		}
		if start != s.Extra["start"] || strings.Join(rels, ",") != s.Extra["relations"] {
			t.Fatalf("%q: start %q, relations %q; the world says %q, %q", s.Question, start, rels, s.Extra["start"], s.Extra["relations"])
		}
	}
	for _, q := range []string{"Who founded Tazomir?", "What is the founder of the Tazomir Company?", "What is the founder Tazomir?", "What is the  of Tazomir?", ""} {
		if _, _, err := ParseQuestion(q); err == nil {
			t.Errorf("%q parsed", q)
		}
	}
}

// TestDiagnose judges gold trajectories and each kind of departure from
// them, made by changing one search, on every 3- and 4-hop test question.
func TestDiagnose(t *testing.T) {
	w := Default()
	test, err := w.Split("test")
	if err != nil {
		t.Fatal(err)
	}
	call := func(query string) string {
		return fmt.Sprintf(`{"name": "search", "arguments": {"query": %q}}`, query)
	}
	n := 0
	for _, s := range test {
		steps := s.Gold.Steps
		k := len(steps)
		if k < 3 {
			continue
		}
		n++
		var calls, obs []string
		for _, st := range steps {
			calls = append(calls, call(st.Query))
			obs = append(obs, fmt.Sprintf("Doc 1(Title: %q) %s", st.Found, foundSentence(st.Query, st.Found)))
		}
		rel := func(i int) string { r, _, _ := strings.Cut(steps[i].Query, " of "); return r }
		other := "capital"
		if rel(1) == other {
			other = "leader"
		}
		wrongRel := append([]string{}, calls...)
		wrongRel[1] = call(other + " of " + steps[0].Found)
		miscopied := append([]string{}, calls...)
		miscopied[1] = call(rel(1) + " of " + steps[0].Found + "x")
		unreadable := append([]string{}, calls...)
		unreadable[2] = `{"name": "search", "arguments": {"q": "x"}}`
		for _, c := range []struct {
			calls []string
			right bool
			want  Verdict
		}{
			{calls, true, Verdict{Right, k, k}},
			{calls[:1], true, Verdict{Right, k, k}}, // a lucky guess is right
			{calls, false, Verdict{WrongAnswer, k, k}},
			{calls[:k-1], false, Verdict{StoppedEarly, k - 1, k}},
			{append(append([]string{}, calls...), calls[0]), false, Verdict{PastTheChain, k + 1, k}},
			{wrongRel, false, Verdict{WrongRelation, 2, k}},
			{miscopied, false, Verdict{MiscopiedName, 2, k}},
			{unreadable, false, Verdict{Unreadable, 3, k}},
		} {
			got, err := Diagnose(s.Question, c.calls, obs, c.right)
			if err != nil || got != c.want {
				t.Fatalf("%q with %d calls (right %v): %v, %v; want %v", s.Question, len(c.calls), c.right, got, err, c.want)
			}
		}
		// A search whose result is not among the observations leaves the
		// next search nothing to copy: it counts as miscopied.
		if got, _ := Diagnose(s.Question, calls, obs[:1], false); got != (Verdict{MiscopiedName, 3, k}) {
			t.Fatalf("%q without the second observation: %v", s.Question, got)
		}
	}
	if n == 0 {
		t.Fatal("no 3- or 4-hop test question")
	}
	if _, err := Diagnose("Who founded Tazomir?", nil, nil, false); err == nil {
		t.Error("a question that does not parse: no error")
	}
	if s := (Verdict{StoppedEarly, 2, 3}).String(); s != "stopped early after 2 searches" {
		t.Errorf("verdict string %q", s)
	}
}

// FuzzParseQuestion: whatever the text, ParseQuestion does not panic, and
// what it parses words back to the same question.
func FuzzParseQuestion(f *testing.F) {
	f.Add("What is the mayor of the headquarters of the publisher of Faslerle?")
	f.Add("Who is the founder of Tazomir?")
	f.Add("What is the of of the of of ?")
	f.Fuzz(func(t *testing.T, q string) {
		start, rels, err := ParseQuestion(q)
		if err != nil {
			return
		}
		var b strings.Builder
		for i := len(rels) - 1; i >= 0; i-- {
			b.WriteString("the " + rels[i] + " of ")
		}
		b.WriteString(start + "?")
		if body := b.String(); q != "What is "+body && q != "Who is "+body {
			t.Fatalf("%q parsed to %q, %q, which words back as %q", q, start, rels, body)
		}
	})
}
