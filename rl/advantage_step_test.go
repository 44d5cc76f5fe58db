package rl

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// stepGolden is rl/testdata/step_golden.json (step_ref.py).
type stepGolden struct {
	Cases []struct {
		Seed         int     `json:"seed"`
		Gamma        float64 `json:"gamma"`
		Lam          float64 `json:"lam"`
		Trajectories []struct {
			Group int `json:"group"`
			Steps []struct {
				Context int       `json:"context"`
				Merged  bool      `json:"merged"`
				Rewards []float64 `json:"rewards"`
				Values  []float64 `json:"values"`
			} `json:"steps"`
		} `json:"trajectories"`
		Expected map[string]struct {
			Advantages []float64 `json:"advantages"`
			Returns    []float64 `json:"returns"`
		} `json:"expected"`
	} `json:"cases"`
}

// unread fills the values of tokens no per-turn estimator may read.
const unread = 1e3

// TestStepEstimatorsGolden packs the reference's turns (merged ones into
// their predecessor's sequence, the others into sequences of their own) and
// checks every estimator's per-token advantages and returns against the
// float64 reference: each credited token carries its turn's values, every
// other token 0.
func TestStepEstimatorsGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/step_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g stepGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Cases {
		b := &Batch{Offsets: []int{0}}
		var turns [][2]int // each row's response tokens
		for j, tr := range c.Trajectories {
			for k, st := range tr.Steps {
				if k > 0 && !st.Merged {
					b.Offsets = append(b.Offsets, len(b.Tokens))
				}
				if k == 0 || !st.Merged {
					b.Group = append(b.Group, tr.Group)
					b.Traj = append(b.Traj, 10*j+7) // any id; consecutive sequences share it
					b.PromptLen = append(b.PromptLen, st.Context)
				}
				for i := 0; i < st.Context; i++ {
					b.Tokens = append(b.Tokens, 1)
					b.ActionMask = append(b.ActionMask, false)
					b.Rewards = append(b.Rewards, 0)
					b.OldValues = append(b.OldValues, unread)
				}
				lo := len(b.Tokens)
				for i := range st.Rewards {
					b.Tokens = append(b.Tokens, 2)
					b.ActionMask = append(b.ActionMask, true)
					b.Rewards = append(b.Rewards, st.Rewards[i])
					b.OldValues = append(b.OldValues, st.Values[i])
				}
				turns = append(turns, [2]int{lo, len(b.Tokens)})
			}
			b.Offsets = append(b.Offsets, len(b.Tokens))
		}
		b.AdvantageMask = b.ActionMask
		for name, want := range c.Expected {
			cfg := AdvantageConfig{Gamma: c.Gamma, Lambda: c.Lam, NormAdvByStd: true}
			cfg.Estimator = name
			switch name {
			case "grpo_dr":
				cfg.Estimator, cfg.NormAdvByStd = "grpo", false
			case "step_grpo_dr":
				cfg.Estimator, cfg.NormAdvByStd = "step_grpo", false
			}
			if err := Estimate(b, &cfg); err != nil {
				t.Fatalf("case %d %s: %v", c.Seed, name, err)
			}
			credited := make([]bool, b.NumTokens())
			for r, span := range turns {
				for k := span[0]; k < span[1]; k++ {
					credited[k] = true
					closeTo(t, c.Seed, name, "advantage", k, b.Advantages[k], want.Advantages[r])
					closeTo(t, c.Seed, name, "return", k, b.Returns[k], want.Returns[r])
				}
			}
			for k, on := range credited {
				if !on && (b.Advantages[k] != 0 || b.Returns[k] != 0) {
					t.Errorf("case %d %s: token %d off the mask has advantage %v return %v", c.Seed, name, k, b.Advantages[k], b.Returns[k])
				}
			}
		}
	}
}

// closeTo allows 1e-7 relative: GRPO's divisor for a group of one is
// float32(1+1e-6) in Go (verl's bits) and 1+1e-6 in the reference.
func closeTo(t *testing.T, seed int, est, what string, k int, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-7*math.Max(1, math.Abs(want)) {
		t.Errorf("case %d %s: %s at token %d is %.12g, want %.12g", seed, est, what, k, got, want)
	}
}

// stepBatch packs trajectories given as turns of action-token rewards, one
// sequence each, a forced token before every turn, values v at the turns'
// first tokens.
func stepBatch(groups []int, turns [][][]float64, values [][]float64) *Batch {
	b := &Batch{Offsets: []int{0}}
	for j, tr := range turns {
		for k, rs := range tr {
			b.ActionMask = append(b.ActionMask, false)
			b.Rewards = append(b.Rewards, 0)
			b.OldValues = append(b.OldValues, unread)
			for i, r := range rs {
				b.ActionMask = append(b.ActionMask, true)
				b.Rewards = append(b.Rewards, r)
				v := unread
				if i == 0 && values != nil {
					v = values[j][k]
				}
				b.OldValues = append(b.OldValues, v)
			}
		}
		b.Offsets = append(b.Offsets, len(b.ActionMask))
		b.Group = append(b.Group, groups[j])
	}
	b.AdvantageMask = b.ActionMask
	return b
}

// TestStepBaselinesCountTrajectoriesOnce: a group of a one-turn trajectory
// that succeeds and a three-turn one that fails. step_rloo credits every
// turn of each with its outcome less the other's: +1 and −1 for all three
// turns. A baseline averaged over turns (0.25) would give the short
// trajectory +0.75 and the long one −0.25 per turn: its turn count, which
// its own actions chose, would move its baseline.
func TestStepBaselinesCountTrajectoriesOnce(t *testing.T) {
	b := stepBatch([]int{0, 0}, [][][]float64{{{0, 1}}, {{0}, {0, 0}, {0}}}, nil)
	for est, want := range map[string][2]float64{"step_rloo": {1, -1}, "step_grpo": {0.5, -0.5}, "rloo": {1, -1}, "grpo": {0.5, -0.5}} {
		cfg := AdvantageConfig{Estimator: est, Gamma: 1, Lambda: 1}
		if err := Estimate(b, &cfg); err != nil {
			t.Fatal(err)
		}
		for k, on := range b.ActionMask {
			seq := b.seqOf(k)
			if on && b.Advantages[k] != want[seq] {
				t.Errorf("%s: token %d of trajectory %d has advantage %v, want %v", est, k, seq, b.Advantages[k], want[seq])
			}
		}
	}
}

// TestStepGAEClosedForm: one trajectory of two turns, r = (0, 1), V = (0.5,
// 0.2), γ = λ = 1: A_1 = 1 − 0.2 = 0.8, A_0 = 0 + 0.2 − 0.5 + 0.8 = 0.5,
// returns 1 and 1; whitened over the two turns (std with N−1 = 0.15·√2):
// ∓1/√2. With γ = 0.5, λ = 0: A_1 = 0.8, A_0 = 0.1 − 0.5 = −0.4.
func TestStepGAEClosedForm(t *testing.T) {
	for _, c := range []struct {
		gamma, lam float64
		adv, ret   [2]float64
	}{
		{1, 1, [2]float64{-1 / math.Sqrt2, 1 / math.Sqrt2}, [2]float64{1, 1}},
		{0.5, 0, [2]float64{-1 / math.Sqrt2, 1 / math.Sqrt2}, [2]float64{0.1, 1}},
	} {
		b := stepBatch([]int{0}, [][][]float64{{{0, 0}, {0, 0, 1}}}, [][]float64{{0.5, 0.2}})
		cfg := AdvantageConfig{Estimator: "step_gae", Gamma: c.gamma, Lambda: c.lam}
		if err := Estimate(b, &cfg); err != nil {
			t.Fatal(err)
		}
		turn := []int{-1, 0, 0, -1, 1, 1, 1}
		for k, tk := range turn {
			if tk < 0 {
				continue
			}
			if math.Abs(b.Advantages[k]-c.adv[tk]) > 1e-7 || math.Abs(b.Returns[k]-c.ret[tk]) > 1e-12 {
				t.Errorf("γ %v λ %v token %d: advantage %v return %v, want %v %v", c.gamma, c.lam, k, b.Advantages[k], b.Returns[k], c.adv[tk], c.ret[tk])
			}
		}
	}
	// One turn in the whole batch cannot be whitened.
	b := stepBatch([]int{0}, [][][]float64{{{1}}}, [][]float64{{0}})
	if err := Estimate(b, &AdvantageConfig{Estimator: "step_gae", Gamma: 1, Lambda: 1}); err == nil {
		t.Error("step_gae whitened a single turn")
	}
}

// TestEstimatorRefusesSplitTrajectories: an estimator that credits
// sequences refuses a batch whose trajectory spans two, naming it.
func TestEstimatorRefusesSplitTrajectories(t *testing.T) {
	b := stepBatch([]int{0, 0}, [][][]float64{{{1}}, {{0}}}, [][]float64{{0}, {0}})
	b.Traj = []int{4, 4}
	for _, est := range []string{"gae", "reinforce_plus_plus", "remax"} {
		err := Estimate(b, &AdvantageConfig{Estimator: est, Gamma: 1, Lambda: 1})
		if err == nil || !strings.Contains(err.Error(), "trajectory 4 spans several") {
			t.Errorf("%s on a split trajectory: %v", est, err)
		}
	}
	b.Traj = []int{4, 5}
	if err := Estimate(b, &AdvantageConfig{Estimator: "reinforce_plus_plus", Gamma: 1, Lambda: 1}); err != nil {
		t.Errorf("one sequence per trajectory: %v", err)
	}
	b.Traj = []int{4, 5, 4}
	b.Offsets = append(b.Offsets, b.NumTokens())
	b.Group = append(b.Group, 0)
	if err := Estimate(b, &AdvantageConfig{Estimator: "step_grpo", Gamma: 1, Lambda: 1}); err == nil || !strings.Contains(err.Error(), "not consecutive") {
		t.Errorf("a trajectory's sequences apart: %v", err)
	}
}

// TestStepRLOOUnbiased computes the expected policy gradient of step_rloo
// and step_grpo exactly, by enumerating every group of three trajectories
// of a two-turn agent, and compares it with the true gradient. At each turn
// the policy answers with p = σ(θ) or searches; answering first scores 0.3,
// searching then answering 1, searching twice 0 (the turn limit); a search
// earns a process reward of 0.1. So trajectories have one or two turns,
// and how many depends on the actions. ∇J with J = 0.3·p + (1−p)·(0.1 + p).
// step_rloo's baseline is the other trajectories': E[ĝ] = ∇J. step_grpo
// (without the std) keeps its own trajectory in the mean: (n−1)/n·∇J. A
// baseline averaged over the group's turns is biased by more than that.
func TestStepRLOOUnbiased(t *testing.T) {
	const theta, n = 0.4, 3
	p := 1 / (1 + math.Exp(-theta))
	dAnswer, dSearch := 1-p, -p // ∇θ log π(answer), ∇θ log π(search)
	type traj struct {
		prob    float64
		turns   [][]float64 // rewards of each turn's one action token
		dlogpis []float64
	}
	kinds := []traj{
		{p, [][]float64{{0.3}}, []float64{dAnswer}},
		{(1 - p) * p, [][]float64{{0.1}, {1}}, []float64{dSearch, dAnswer}},
		{(1 - p) * (1 - p), [][]float64{{0.1}, {0}}, []float64{dSearch, dSearch}},
	}
	dJ := 0.3*p*(1-p) + p*(1-p)*(-0.1+1-2*p) // d/dθ of 0.3p + (1−p)(0.1+p)
	expect := func(est func(b *Batch) error) float64 {
		var e float64
		for c := 0; c < 27; c++ {
			pick := []traj{kinds[c%3], kinds[c/3%3], kinds[c/9]}
			prob := pick[0].prob * pick[1].prob * pick[2].prob
			var turns [][][]float64
			for _, k := range pick {
				turns = append(turns, k.turns)
			}
			b := stepBatch([]int{0, 0, 0}, turns, nil)
			if err := est(b); err != nil {
				t.Fatal(err)
			}
			var g float64
			for j, k := range pick {
				s, _ := b.Seq(j)
				for turn := range k.turns {
					g += b.Advantages[s+2*turn+1] * k.dlogpis[turn] // the turn's action token
				}
			}
			e += prob * g / n
		}
		return e
	}
	registry := func(name string) func(*Batch) error {
		return func(b *Batch) error { return Estimate(b, &AdvantageConfig{Estimator: name, Gamma: 1, Lambda: 1}) }
	}
	if got := expect(registry("step_rloo")); math.Abs(got-dJ) > 1e-12 {
		t.Errorf("step_rloo: E[ĝ] = %.15g, ∇J = %.15g", got, dJ)
	}
	if got, want := expect(registry("step_grpo")), dJ*(n-1)/n; math.Abs(got-want) > 1e-12 {
		t.Errorf("step_grpo (no std): E[ĝ] = %.15g, want (n−1)/n·∇J = %.15g", got, want)
	}
	// The per-turn mean baseline: reward to go less the mean over every
	// turn of the group of the turns' rewards to go.
	perTurn := func(b *Batch) error {
		tab, G, err := b.stepReturns(&AdvantageConfig{Gamma: 1, Lambda: 1})
		if err != nil {
			return err
		}
		var sum float64
		var cnt int
		for _, g := range G {
			for _, x := range g {
				sum, cnt = sum+x, cnt+1
			}
		}
		adv := make([][]float64, len(G))
		for j, g := range G {
			for _, x := range g {
				adv[j] = append(adv[j], x-sum/float64(cnt))
			}
		}
		b.broadcastSteps(tab, adv, adv)
		return nil
	}
	if got := expect(perTurn); math.Abs(got-dJ*(n-1)/n) < 1e-3 || math.Abs(got-dJ) < 1e-3 {
		t.Errorf("the per-turn baseline came out unbiased (%.6g, ∇J %.6g): the test cannot tell", got, dJ)
	}
}
