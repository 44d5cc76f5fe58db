package rl

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// rollcorr_golden.json is written by testdata/rollcorr_ref.py, an
// independent numpy implementation of verl's and AReaL's formulas on dense
// padded arrays. When python3 with numpy is present the test runs the script
// and uses its fresh output (and says so if the committed file is stale);
// otherwise it reads the committed file.

type mismatchCase struct {
	Name     string             `json:"name"`
	Offsets  []int              `json:"offsets"`
	Mask     []bool             `json:"mask"`
	Rollout  []float64          `json:"rollout"`
	Train    []float64          `json:"train"`
	NaNTrain []int              `json:"nan_train"`
	Metrics  map[string]float64 `json:"metrics"`
	Turns    [][]TurnMismatch   `json:"turns"`
}

type rollcorrGolden struct {
	Mismatch []mismatchCase `json:"mismatch"`
	Correct  []correctCase  `json:"correct"`
	Decouple []decoupleCase `json:"decoupled"`
}

func loadRollcorrGolden(t *testing.T) rollcorrGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/rollcorr_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		for _, p := range []string{"/usr/bin/python3", py} {
			fresh, err := exec.Command(p, "testdata/rollcorr_ref.py").Output()
			if err != nil {
				continue // this python has no numpy: try the next, else keep the committed values
			}
			if !bytes.Equal(bytes.TrimSpace(fresh), bytes.TrimSpace(raw)) {
				t.Logf("testdata/rollcorr_golden.json differs from a fresh run of rollcorr_ref.py; using the fresh values")
			}
			raw = fresh
			break
		}
	}
	var g rollcorrGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Mismatch) == 0 {
		t.Fatal("rollcorr golden has no mismatch cases")
	}
	return g
}

// closeRel compares with a relative tolerance of 1e-9 (an absolute one
// near 0): the reference is float64 too, summed in another order.
func closeRel(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestMismatchMetricsGolden(t *testing.T) {
	g := loadRollcorrGolden(t)
	for _, c := range g.Mismatch {
		for _, k := range c.NaNTrain {
			c.Train[k] = math.NaN()
		}
		m, err := MismatchMetrics(c.Offsets, c.Mask, c.Rollout, c.Train)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if len(m) != len(c.Metrics) {
			t.Errorf("%s: %d metrics %v, the reference %d %v", c.Name, len(m), m.Names(), len(c.Metrics), c.Metrics)
		}
		for k, want := range c.Metrics {
			got, ok := m[k]
			if !ok || !closeRel(got, want) {
				t.Errorf("%s: %s = %v, reference %v", c.Name, k, got, want)
			}
		}
		turns, err := TurnMismatches(c.Offsets, c.Mask, c.Rollout, c.Train)
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) != len(c.Turns) {
			t.Fatalf("%s: %d sequences of turns, reference %d", c.Name, len(turns), len(c.Turns))
		}
		for i := range turns {
			if len(turns[i]) != len(c.Turns[i]) {
				t.Errorf("%s: sequence %d has %d turns, reference %d", c.Name, i, len(turns[i]), len(c.Turns[i]))
				continue
			}
			for j, w := range c.Turns[i] {
				g := turns[i][j]
				if g.Tokens != w.Tokens || !closeRel(g.KL, w.KL) || !closeRel(g.K3, w.K3) ||
					!closeRel(g.ProbDiffMean, w.ProbDiffMean) || !closeRel(g.ProbDiffMax, w.ProbDiffMax) {
					t.Errorf("%s: sequence %d turn %d: %+v, reference %+v", c.Name, i, j, g, w)
				}
			}
		}
	}
}

func TestMismatchMetricsErrors(t *testing.T) {
	off := []int{0, 3, 5}
	mask := []bool{false, true, true, false, true}
	roll := []float64{0, -1, -2, 0, -0.5}
	train := []float64{0, -1.1, math.NaN(), 0, -0.4}
	_, err := MismatchMetrics(off, mask, roll, train)
	if err == nil || !strings.Contains(err.Error(), "OldLogProb[2] (sequence 0, token 2) is NaN") {
		t.Errorf("NaN on an action token: %v", err)
	}
	train[2] = -2
	roll[4] = math.Inf(-1)
	if _, err := MismatchMetrics(off, mask, roll, train); err == nil || !strings.Contains(err.Error(), "SampleLogProb[4] (sequence 1, token 1)") {
		t.Errorf("-Inf sampling log-prob: %v", err)
	}
	if _, err := MismatchMetrics(off, mask[:4], roll, train); err == nil {
		t.Error("a short mask passed")
	}
	// Equal log-probs: every figure is exactly its ideal value.
	m, err := MismatchMetrics(off, mask, train, train)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"rollout_corr/kl": 0, "rollout_corr/k3_kl": 0, "rollout_corr/ppl_ratio": 1,
		"training/rollout_probs_diff_max": 0, "rollout_corr/chi2_seq": 0, "rollout_corr/log_ppl_diff": 0} {
		if m[k] != want {
			t.Errorf("equal log-probs: %s = %v, want %v", k, m[k], want)
		}
	}
}
