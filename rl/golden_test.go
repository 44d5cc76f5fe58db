package rl

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

// golden.json is written by testdata/golden.py, an independent numpy/torch
// implementation of verl's formulas on dense padded tensors (torch autograd
// for the gradients).
type goldenDoc struct {
	Cases []struct {
		Batch  goldenBatch     `json:"batch"`
		Expect json.RawMessage `json:"expect"`
	} `json:"cases"`
}

type goldenBatch struct {
	Offsets     []int       `json:"offsets"`
	PromptLen   []int       `json:"prompt_len"`
	Group       []int       `json:"group"`
	Tokens      []int32     `json:"tokens"`
	ActionMask  []int       `json:"action_mask"`
	OldLogProb  []float64   `json:"old_logprob"`
	RefLogProb  []float64   `json:"ref_logprob"`
	LogProb     []float64   `json:"logprob"`
	LogProbGSPO []float64   `json:"logprob_gspo"`
	Values      []float64   `json:"values"`
	OldValues   []float64   `json:"old_values"`
	Entropy     []float64   `json:"entropy"`
	Outcome     []float64   `json:"outcome"`
	Process     [][]float64 `json:"process"`
	Baseline    []float64   `json:"baseline"`
	ToolEnd     int32       `json:"tool_end"`
}

type goldenEstimate struct {
	Advantages []float64 `json:"advantages"`
	Returns    []float64 `json:"returns"`
}

type goldenLoss struct {
	Config struct {
		PolicyLoss string  `json:"policy_loss"`
		ClipLow    float64 `json:"clip_low"`
		ClipHigh   float64 `json:"clip_high"`
		ClipC      float64 `json:"clip_c"`
		Agg        string  `json:"agg"`
		Advantages string  `json:"advantages"`
		Returns    string  `json:"returns"`
		LogProb    string  `json:"logprob"`
		Entropy    float64 `json:"entropy_coeff"`
		KLType     string  `json:"kl_loss_type"`
		KLCoef     float64 `json:"kl_loss_coef"`
		Cliprange  float64 `json:"cliprange_value"`
	} `json:"config"`
	Loss     float64            `json:"loss"`
	Metrics  map[string]float64 `json:"metrics"`
	DLogProb []float64          `json:"dlogprob"`
	DEntropy []float64          `json:"dentropy"`
	DValue   []float64          `json:"dvalue"`
}

type goldenExpect struct {
	Scores      []float64 `json:"scores"`
	ScoresPrime []float64 `json:"scores_prime"`
	KLFixed     struct {
		Rewards   []float64          `json:"rewards"`
		Metrics   map[string]float64 `json:"metrics"`
		BetaAfter float64            `json:"beta_after"`
	} `json:"kl_reward_fixed_k1"`
	KLAdaptive struct {
		Rewards   []float64          `json:"rewards"`
		Metrics   map[string]float64 `json:"metrics"`
		BetaAfter float64            `json:"beta_after"`
	} `json:"kl_reward_adaptive_k3"`
	Estimators   map[string]goldenEstimate `json:"estimators"`
	DataMetrics  map[string]float64        `json:"data_metrics"`
	Losses       map[string]goldenLoss     `json:"losses"`
	KLEstimators map[string]struct {
		Value []float64 `json:"value"`
		DP    []float64 `json:"dp"`
	} `json:"kl_estimators"`
}

func loadGolden(t *testing.T) []struct {
	batch  goldenBatch
	expect goldenExpect
} {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc goldenDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := make([]struct {
		batch  goldenBatch
		expect goldenExpect
	}, len(doc.Cases))
	for i, c := range doc.Cases {
		out[i].batch = c.Batch
		if err := json.Unmarshal(c.Expect, &out[i].expect); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatal("golden.json has no cases")
	}
	return out
}

// newGoldenBatch builds the Batch with Scores placed (outcome and process).
func newGoldenBatch(t *testing.T, g goldenBatch) *Batch {
	t.Helper()
	mask := make([]bool, len(g.ActionMask))
	for i, v := range g.ActionMask {
		mask[i] = v == 1
	}
	b := &Batch{
		Offsets: g.Offsets, PromptLen: g.PromptLen, Group: g.Group, Tokens: g.Tokens,
		ActionMask: mask, AdvantageMask: mask,
		OldLogProb: g.OldLogProb, RefLogProb: g.RefLogProb, LogProb: g.LogProb,
		Values: g.Values, OldValues: g.OldValues, Entropy: g.Entropy,
		BaselineScore: g.Baseline,
	}
	if err := AddOutcome(b, g.Outcome); err != nil {
		t.Fatal(err)
	}
	if err := AddProcessRewards(b, g.ToolEnd, g.Process, false); err != nil {
		t.Fatal(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenTol is the agreement required with the float64 reference.
const goldenTol = 1e-6

func near(got, want float64) bool {
	return math.Abs(got-want) <= goldenTol*math.Max(math.Abs(want), 1e-3)
}

func checkSlice(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	bad := 0
	for i := range want {
		if !near(got[i], want[i]) {
			if bad < 3 {
				t.Errorf("%s[%d] = %.17g, want %.17g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

func checkMetrics(t *testing.T, what string, got Metrics, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: metric %s missing", what, k)
		} else if !near(g, w) {
			t.Errorf("%s: metric %s = %.17g, want %.17g", what, k, g, w)
		}
	}
}

func TestGoldenRewards(t *testing.T) {
	for ci, c := range loadGolden(t) {
		b := newGoldenBatch(t, c.batch)
		checkSlice(t, fmt.Sprintf("case %d scores", ci), b.Scores, c.expect.Scores)

		p := newGoldenBatch(t, c.batch)
		p.Scores = nil
		if err := AddOutcome(p, c.batch.Outcome); err != nil {
			t.Fatal(err)
		}
		if err := AddProcessRewards(p, c.batch.ToolEnd, c.batch.Process, true); err != nil {
			t.Fatal(err)
		}
		checkSlice(t, fmt.Sprintf("case %d scores with PRIME norm", ci), p.Scores, c.expect.ScoresPrime)

		fixed := &FixedKL{Coef: 0.05}
		m, err := ApplyKLPenalty(b, KLType{Estimator: KLK1}, fixed)
		if err != nil {
			t.Fatal(err)
		}
		checkSlice(t, fmt.Sprintf("case %d KL-penalised rewards (k1, fixed)", ci), b.Rewards, c.expect.KLFixed.Rewards)
		checkMetrics(t, fmt.Sprintf("case %d KL penalty (fixed)", ci), m, c.expect.KLFixed.Metrics)
		if fixed.Value() != c.expect.KLFixed.BetaAfter {
			t.Errorf("case %d fixed β after update = %v, want %v", ci, fixed.Value(), c.expect.KLFixed.BetaAfter)
		}

		ad := &AdaptiveKL{Coef: 0.05, Target: 0.1, Horizon: 100}
		m, err = ApplyKLPenalty(b, KLType{Estimator: KLK3}, ad)
		if err != nil {
			t.Fatal(err)
		}
		checkSlice(t, fmt.Sprintf("case %d KL-penalised rewards (k3, adaptive)", ci), b.Rewards, c.expect.KLAdaptive.Rewards)
		checkMetrics(t, fmt.Sprintf("case %d KL penalty (adaptive)", ci), m, c.expect.KLAdaptive.Metrics)
		if !near(ad.Value(), c.expect.KLAdaptive.BetaAfter) {
			t.Errorf("case %d adaptive β after update = %v, want %v", ci, ad.Value(), c.expect.KLAdaptive.BetaAfter)
		}
	}
}

// goldenEstimators maps the reference's case names to estimator configs.
var goldenEstimators = map[string]struct {
	cfg          AdvantageConfig
	responseMask bool // advantage mask disabled (Table 4 ablation)
	klReward     bool // rewards with the k1 penalty, β = 0.05
}{
	"gae":                          {cfg: AdvantageConfig{Estimator: "gae", Gamma: 1, Lambda: 1}},
	"gae_discount":                 {cfg: AdvantageConfig{Estimator: "gae", Gamma: 0.95, Lambda: 0.9}},
	"gae_no_adv_mask":              {cfg: AdvantageConfig{Estimator: "gae", Gamma: 0.95, Lambda: 0.9}, responseMask: true},
	"gae_kl_reward":                {cfg: AdvantageConfig{Estimator: "gae", Gamma: 1, Lambda: 1}, klReward: true},
	"grpo":                         {cfg: AdvantageConfig{Estimator: "grpo", NormAdvByStd: true}},
	"dr_grpo":                      {cfg: AdvantageConfig{Estimator: "grpo", NormAdvByStd: false}},
	"rloo":                         {cfg: AdvantageConfig{Estimator: "rloo"}},
	"reinforce_plus_plus":          {cfg: AdvantageConfig{Estimator: "reinforce_plus_plus", Gamma: 1}},
	"reinforce_plus_plus_discount": {cfg: AdvantageConfig{Estimator: "reinforce_plus_plus", Gamma: 0.97}},
	"reinforce_plus_plus_baseline": {cfg: AdvantageConfig{Estimator: "reinforce_plus_plus_baseline"}},
	"remax":                        {cfg: AdvantageConfig{Estimator: "remax"}},
}

func TestGoldenEstimators(t *testing.T) {
	for ci, c := range loadGolden(t) {
		if len(c.expect.Estimators) != len(goldenEstimators) {
			t.Errorf("case %d: golden has %d estimator runs, the test knows %d", ci, len(c.expect.Estimators), len(goldenEstimators))
		}
		for name, want := range c.expect.Estimators {
			spec, ok := goldenEstimators[name]
			if !ok {
				t.Errorf("golden estimator run %q unknown to the test", name)
				continue
			}
			b := newGoldenBatch(t, c.batch)
			if spec.responseMask {
				m, err := b.ResponseMask()
				if err != nil {
					t.Fatal(err)
				}
				b.AdvantageMask = m
			}
			if spec.klReward {
				if _, err := ApplyKLPenalty(b, KLType{Estimator: KLK1}, &FixedKL{Coef: 0.05}); err != nil {
					t.Fatal(err)
				}
			}
			if err := Estimate(b, &spec.cfg); err != nil {
				t.Fatalf("case %d %s: %v", ci, name, err)
			}
			checkSlice(t, fmt.Sprintf("case %d %s advantages", ci, name), b.Advantages, want.Advantages)
			checkSlice(t, fmt.Sprintf("case %d %s returns", ci, name), b.Returns, want.Returns)
		}
	}
}

func TestGoldenDataMetrics(t *testing.T) {
	for ci, c := range loadGolden(t) {
		b := newGoldenBatch(t, c.batch)
		if err := GAE(b, &AdvantageConfig{Gamma: 1, Lambda: 1}); err != nil {
			t.Fatal(err)
		}
		m, err := DataMetrics(b)
		if err != nil {
			t.Fatal(err)
		}
		checkMetrics(t, fmt.Sprintf("case %d data metrics", ci), m, c.expect.DataMetrics)
	}
}

func TestGoldenLosses(t *testing.T) {
	for ci, c := range loadGolden(t) {
		for name, want := range c.expect.Losses {
			b := newGoldenBatch(t, c.batch)
			cfg := DefaultLossConfig()
			cf := want.Config
			est := "gae_discount"
			if cf.Advantages != "" {
				est = cf.Advantages
			} else if cf.Returns != "" {
				est = cf.Returns
			}
			ecfg := goldenEstimators[est].cfg
			if err := Estimate(b, &ecfg); err != nil {
				t.Fatal(err)
			}
			if cf.LogProb == "logprob_gspo" {
				b.LogProb = c.batch.LogProbGSPO
			}
			mode, err := ParseAggMode(cf.Agg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.AggMode = mode
			cfg.ClipRatioLow, cfg.ClipRatioHigh, cfg.ClipRatioC = cf.ClipLow, cf.ClipHigh, cf.ClipC
			cfg.EntropyCoeff = cf.Entropy
			if cf.KLType != "" {
				cfg.UseKLLoss, cfg.KLLossType, cfg.KLLossCoef = true, cf.KLType, cf.KLCoef
			}
			norm, err := NewNorm(mode, b, 0)
			if err != nil {
				t.Fatal(err)
			}
			var out Output
			what := fmt.Sprintf("case %d %s", ci, name)
			if cf.PolicyLoss == "" {
				err = CriticLoss(b, cf.Cliprange, norm, &out)
			} else {
				cfg.PolicyLoss = cf.PolicyLoss
				if cf.Entropy == 0 {
					b.Entropy = nil // no entropy term, as in the reference
				}
				err = ActorLoss(b, &cfg, norm, &out)
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !near(out.Loss, want.Loss) {
				t.Errorf("%s: loss %.17g, want %.17g", what, out.Loss, want.Loss)
			}
			checkMetrics(t, what, out.Metrics, want.Metrics)
			for _, g := range []struct {
				name      string
				got, want []float64
			}{{"dlogprob", out.DLogProb, want.DLogProb}, {"dentropy", out.DEntropy, want.DEntropy}, {"dvalue", out.DValue, want.DValue}} {
				if g.want == nil {
					if g.got != nil && !(g.name == "dentropy" && cfg.EntropyCoeff == 0) {
						t.Errorf("%s: %s set, the reference has no such gradient", what, g.name)
					}
					continue
				}
				checkSlice(t, what+" "+g.name, g.got, g.want)
			}
		}
	}
}

func TestGoldenKLEstimators(t *testing.T) {
	for ci, c := range loadGolden(t) {
		for name, want := range c.expect.KLEstimators {
			kind, err := ParseKL(name)
			if err != nil {
				t.Fatal(err)
			}
			val, dp := make([]float64, len(want.Value)), make([]float64, len(want.DP))
			for i := range val {
				val[i], dp[i] = kind.Eval(c.batch.LogProb[i], c.batch.RefLogProb[i])
			}
			checkSlice(t, fmt.Sprintf("case %d KL %s value", ci, name), val, want.Value)
			checkSlice(t, fmt.Sprintf("case %d KL %s d/dp", ci, name), dp, want.DP)
		}
	}
}
