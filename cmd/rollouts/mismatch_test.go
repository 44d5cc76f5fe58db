package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/rl"
)

func TestRenderShowsTurnMismatch(t *testing.T) {
	r := record(0, nil)
	r.Mismatch = []rl.TurnMismatch{{Tokens: 10, KL: 1e-4, K3: 2e-5, ProbDiffMean: 3e-3, ProbDiffMax: 0.01},
		{Tokens: 10, KL: 0.02, K3: 0.004, ProbDiffMean: 0.05, ProbDiffMax: 0.2}}
	path := filepath.Join(t.TempDir(), "step_3.jsonl")
	if err := rl.WriteDump(path, []rl.DumpRecord{r}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, path, 0, false, false, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"▶ action: tokens 10-20, mask 1; sampler vs trainer: k1 0.0001, k3 2e-05, |Δp| mean 0.003 max 0.01\n",
		"▶ action: tokens 30-40, mask 1; sampler vs trainer: k1 0.02, k3 0.004, |Δp| mean 0.05 max 0.2\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(&out, path, 0, true, false, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "mismatch k3 0.004 (turn 2 of 2)") {
		t.Errorf("list: %s", out.String())
	}
}
