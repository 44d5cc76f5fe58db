package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/rl"
)

// TestChains counts a dump of four trajectories on synthetic questions by
// verdict, in all and by hop count, and names a question that is not a
// synthetic one.
func TestChains(t *testing.T) {
	search := func(q string) string { return fmt.Sprintf(`{"name": "search", "arguments": {"query": %q}}`, q) }
	q3 := "What is the birthplace of the mayor of the headquarters of Dinzafi?"
	calls := []string{search("headquarters of Dinzafi"), search("mayor of Lunnuntil"), search("birthplace of Gersun")}
	obs := []string{`Doc 1(Title: "Dinzafi") The headquarters of Dinzafi is Lunnuntil.`,
		`Doc 1(Title: "Lunnuntil") The mayor of Lunnuntil is Gersun.`,
		`Doc 1(Title: "Gersun") The birthplace of Gersun is Kenvam.`}
	rec := func(i int, q string, calls []string, em float64) rl.DumpRecord {
		return rl.DumpRecord{Index: i, Question: q, ToolCalls: calls, Obs: obs[:min(len(calls), len(obs))], Metrics: map[string]float64{"em": em}}
	}
	recs := []rl.DumpRecord{
		rec(0, q3, calls, 1),
		rec(1, q3, []string{calls[0], search("founder of Lunnuntil")}, 0),
		rec(2, q3, calls[:2], 0),
		rec(3, "Who is the founder of Dinzafi?", []string{search("founder of Dinzafi")}, 1),
	}
	path := filepath.Join(t.TempDir(), "agent.jsonl")
	if err := rl.WriteDump(path, recs); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := chains(&out, path); err != nil {
		t.Fatal(err)
	}
	want := "all: 4 trajectories\n" +
		"      2   50.0 %  right\n" +
		"      1   25.0 %  stopped early after 2 searches\n" +
		"      1   25.0 %  wrong relation at search 2\n" +
		"1-hop: 1 trajectories\n" +
		"      1  100.0 %  right\n" +
		"3-hop: 3 trajectories\n" +
		"      1   33.3 %  right\n" +
		"      1   33.3 %  stopped early after 2 searches\n" +
		"      1   33.3 %  wrong relation at search 2\n"
	if out.String() != want {
		t.Errorf("chains printed\n%s\nwant\n%s", out.String(), want)
	}
	recs[2].Question = "what is alpha?"
	if err := rl.WriteDump(path, recs); err != nil {
		t.Fatal(err)
	}
	if err := chains(&out, path); err == nil || !strings.Contains(err.Error(), "trajectory 2") {
		t.Errorf("a question that is not synthetic: %v", err)
	}
}
