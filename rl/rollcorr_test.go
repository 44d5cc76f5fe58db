package rl

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
)

type correctCase struct {
	Name    string             `json:"name"`
	Offsets []int              `json:"offsets"`
	Mask    []bool             `json:"mask"`
	Rollout []float64          `json:"rollout"`
	Train   []float64          `json:"train"`
	Config  map[string]any     `json:"config"`
	Weights []float64          `json:"weights"`
	Keep    []bool             `json:"keep"`
	Metrics map[string]float64 `json:"metrics"`
}

type decoupleCase struct {
	Name       string             `json:"name"`
	Offsets    []int              `json:"offsets"`
	Mask       []bool             `json:"mask"`
	Behaviour  []float64          `json:"behaviour"`
	Proximal   []float64          `json:"proximal"`
	LogProb    []float64          `json:"logprob"`
	Advantages []float64          `json:"advantages"`
	Cap        float64            `json:"cap"`
	Loss       float64            `json:"loss"`
	Grad       []float64          `json:"grad"`
	Metrics    map[string]float64 `json:"metrics"`
}

func (c *correctCase) config() RolloutCorrectionConfig {
	cfg := DefaultRolloutCorrectionConfig()
	str := func(k string) string { s, _ := c.Config[k].(string); return s }
	cfg.IS, cfg.RS, cfg.RSThreshold = str("rollout_is"), str("rollout_rs"), str("rollout_rs_threshold")
	if v, ok := c.Config["rollout_is_threshold"].(float64); ok {
		cfg.ISThreshold = v
	}
	cfg.ISBatchNormalize, _ = c.Config["rollout_is_batch_normalize"].(bool)
	return cfg
}

func TestRolloutCorrectionGolden(t *testing.T) {
	g := loadRollcorrGolden(t)
	if len(g.Correct) == 0 {
		t.Fatal("no correction cases")
	}
	for _, c := range g.Correct {
		cfg := c.config()
		got, err := RolloutCorrection(&cfg, c.Offsets, c.Mask, c.Rollout, c.Train)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if (got.Weights == nil) != (c.Weights == nil) || (got.Keep == nil) != (c.Keep == nil) {
			t.Fatalf("%s: weights %v keep %v, reference %v %v", c.Name, got.Weights != nil, got.Keep != nil, c.Weights != nil, c.Keep != nil)
		}
		for k := range c.Weights {
			if !closeRel(got.Weights[k], c.Weights[k]) {
				t.Errorf("%s: weight[%d] = %v, reference %v", c.Name, k, got.Weights[k], c.Weights[k])
			}
		}
		for k := range c.Keep {
			if got.Keep[k] != c.Keep[k] {
				t.Errorf("%s: keep[%d] = %v, reference %v", c.Name, k, got.Keep[k], c.Keep[k])
			}
		}
		if len(got.Metrics) != len(c.Metrics) {
			t.Errorf("%s: metrics %v, reference %v", c.Name, got.Metrics.Names(), c.Metrics)
		}
		for k, want := range c.Metrics {
			if v, ok := got.Metrics[k]; !ok || !closeRel(v, want) {
				t.Errorf("%s: %s = %v, reference %v", c.Name, k, v, want)
			}
		}
	}
}

func TestRolloutCorrectionConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  RolloutCorrectionConfig
		want string
	}{
		{RolloutCorrectionConfig{IS: "token", ISThreshold: 0.5}, "rollout_is_threshold 0.5 must be a finite number ≥ 1"},
		{RolloutCorrectionConfig{IS: "tokens", ISThreshold: 2}, `rollout_is "tokens" is none of`},
		{RolloutCorrectionConfig{RS: "token_k1", RSThreshold: "2_0.5"}, "the lower bound 2 is above the upper bound 0.5"},
		{RolloutCorrectionConfig{RS: "token_k1", RSThreshold: "0.5"}, "the lower bound 2 is above the upper bound 0.5"},
		{RolloutCorrectionConfig{RS: "token_k1"}, "needs rollout_rs_threshold"},
		{RolloutCorrectionConfig{RS: "seq_max_k1", RSThreshold: "2"}, `option "seq_max_k1" is unknown`},
		{RolloutCorrectionConfig{RS: "token_k3", RSThreshold: "0.1_2"}, "takes one upper bound"},
		{RolloutCorrectionConfig{RS: "token_k3", RSThreshold: "-1"}, "is not a positive number"},
		{RolloutCorrectionConfig{RS: "token_k1,token_k2", RSThreshold: "2,3,4"}, "one per option (2)"},
		{RolloutCorrectionConfig{LossType: "reinforce"}, "set bypass_mode true"},
		{RolloutCorrectionConfig{LossType: "ppo"}, `loss_type "ppo"`},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
	var zero RolloutCorrectionConfig
	if err := zero.Validate(); err != nil {
		t.Errorf("the zero config (all off): %v", err)
	}
	lc := DefaultLossConfig()
	lc.BehavImpWeightCap = 0.9
	if err := lc.Validate(); err == nil || !strings.Contains(err.Error(), "behav_imp_weight_cap 0.9") {
		t.Errorf("cap 0.9: %v", err)
	}
}

func TestDecoupledGolden(t *testing.T) {
	g := loadRollcorrGolden(t)
	if len(g.Decouple) == 0 {
		t.Fatal("no decoupled cases")
	}
	for _, c := range g.Decouple {
		b := &Batch{Offsets: c.Offsets, ActionMask: c.Mask, SampleLogProb: c.Behaviour, OldLogProb: c.Proximal,
			LogProb: c.LogProb, Advantages: c.Advantages}
		cfg := DefaultLossConfig()
		cfg.PolicyLoss, cfg.ClipRatioHigh, cfg.BehavImpWeightCap = "decoupled", 0.28, c.Cap
		out, err := namedLoss("decoupled", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if !closeRel(out.Loss, c.Loss) {
			t.Errorf("%s: loss %v, reference %v", c.Name, out.Loss, c.Loss)
		}
		for k, want := range c.Metrics {
			if !closeRel(out.Metrics[k], want) {
				t.Errorf("%s: %s = %v, reference %v", c.Name, k, out.Metrics[k], want)
			}
		}
		// The reference gradient is a central difference: 1e-6 of its scale.
		for k, want := range c.Grad {
			if math.Abs(out.DLogProb[k]-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%s: dL/dlogprob[%d] = %v, reference %v", c.Name, k, out.DLogProb[k], want)
			}
		}
	}
}

// decoupledTwin is the decoupled loss as a gorgonia graph, with RefLogProb
// standing in for the behaviour log-probs (Vars has no SampleLogProb) and the
// cap of the test below.
func decoupledTwin(v *Vars) (*G.Node, error) {
	pg, err := ppoTwin(v)
	if err != nil {
		return nil, err
	}
	bw := G.Must(G.Exp(clampNode(v, G.Must(G.Sub(v.OldLogProb, v.RefLogProb)), -logRatioClamp, logRatioClamp)))
	under := G.Must(G.Lte(bw, v.Full(twinCap), true))
	return G.HadamardProd(pg, G.Must(G.HadamardProd(bw, under)))
}

const twinCap = 1.3

// weightedTwin is vanilla PPO with each token's loss times Values[t]: the
// oracle for an importance weight applied to the per-token loss.
func weightedTwin(v *Vars) (*G.Node, error) {
	pg, err := ppoTwin(v)
	if err != nil {
		return nil, err
	}
	return G.HadamardProd(pg, v.Values)
}

func init() {
	RegisterLoss("twin-decoupled", AutodiffLoss(decoupledTwin))
	RegisterLoss("twin-vanilla-weighted", AutodiffLoss(weightedTwin))
}

func TestDecoupledTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := randomBatch(rng, 24)
	b.SampleLogProb = make([]float64, len(b.OldLogProb))
	for k := range b.SampleLogProb {
		b.SampleLogProb[k] = b.OldLogProb[k] + 0.4*rng.NormFloat64()
	}
	b.RefLogProb = b.SampleLogProb
	for _, mode := range []AggMode{TokenMean, SeqMeanTokenMean} {
		cfg := DefaultLossConfig()
		cfg.AggMode, cfg.ClipRatioHigh, cfg.BehavImpWeightCap = mode, 0.28, twinCap
		hand, err := namedLoss("decoupled", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if m := hand.Metrics["actor/behave_mask"]; m == 1 || m == 0 {
			t.Fatalf("behave_mask %v: the batch must have tokens on both sides of the cap", m)
		}
		twin, err := namedLoss("twin-decoupled", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if !near(hand.Loss, twin.Loss) {
			t.Errorf("%s: decoupled loss %v, twin %v", mode, hand.Loss, twin.Loss)
		}
		checkGrad(t, string(mode)+" decoupled dlogprob vs gorgonia", hand.DLogProb, twin.DLogProb)
	}
}

// TestISWeightsOnEveryLoss: the trainer applies an importance weight by
// scaling the advantages the policy loss reads. For a weight constant
// over a sequence (sequence and geometric levels) that must equal scaling
// the sequence's aggregation weight, for every policy loss, hand-written
// or autodiff; for token weights it must equal multiplying each token's
// loss by its weight, which gorgonia checks on the vanilla loss.
func TestISWeightsOnEveryLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	b := gspoBatch(t, rng)
	b.SampleLogProb = make([]float64, len(b.OldLogProb))
	for k := range b.SampleLogProb {
		b.SampleLogProb[k] = b.OldLogProb[k] + 0.2*rng.NormFloat64()
	}
	b.RefLogProb = b.SampleLogProb
	seqW := make([]float64, b.NumSeqs())
	tokW := make([]float64, b.NumTokens())
	for i := range seqW {
		seqW[i] = 0.5 + 1.5*rng.Float64()
		s, e := b.Seq(i)
		for k := s; k < e; k++ {
			tokW[k] = seqW[i]
		}
	}
	for _, name := range []string{"vanilla", "gspo", "decoupled", "bypass_reinforce", "twin-vanilla", "twin-decoupled"} {
		for _, mode := range []AggMode{TokenMean, SeqMeanTokenSum, SeqMeanTokenMean} {
			cfg := DefaultLossConfig()
			cfg.AggMode, cfg.BehavImpWeightCap = mode, twinCap
			if name == "gspo" {
				cfg.ClipRatioLow, cfg.ClipRatioHigh = 3e-4, 4e-4
			}
			scaled := *b
			applyCorrection(&scaled, &Correction{Weights: tokW})
			got, err := namedLoss(name, cfg)(&scaled)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := LookupLoss(name)
			norm, err := NewNorm(cfg.AggMode, b, 0)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := norm.SeqWeights(b, nil)
			for i := range w {
				w[i] *= seqW[i]
			}
			want := &Output{}
			want.Reset(b.NumTokens())
			if err := l(b, &cfg, w, want); err != nil {
				t.Fatal(err)
			}
			if !near(got.Loss, want.Loss) {
				t.Errorf("%s %s: loss %v with scaled advantages, %v with scaled sequence weights", name, mode, got.Loss, want.Loss)
			}
			checkGrad(t, name+" "+string(mode)+" sequence-level weights", got.DLogProb, want.DLogProb)
		}
	}
	// Token weights on the vanilla loss against the per-token product.
	for k := range tokW {
		tokW[k] = 0.3 + 2*rng.Float64()
	}
	cfg := DefaultLossConfig()
	scaled := *b
	applyCorrection(&scaled, &Correction{Weights: tokW})
	got, err := namedLoss("vanilla", cfg)(&scaled)
	if err != nil {
		t.Fatal(err)
	}
	withW := *b
	withW.Values = tokW
	want, err := namedLoss("twin-vanilla-weighted", cfg)(&withW)
	if err != nil {
		t.Fatal(err)
	}
	if !near(got.Loss, want.Loss) {
		t.Errorf("token weights: loss %v, gorgonia %v", got.Loss, want.Loss)
	}
	checkGrad(t, "token weights dlogprob vs gorgonia", got.DLogProb, want.DLogProb)
}

// TestRejectionLeavesTheLoss: a rejected token contributes nothing and the
// token-mean normaliser counts only the kept ones, as verl's rewritten
// response mask does; rejecting everything leaves no normaliser.
func TestRejectionLeavesTheLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	b := randomBatch(rng, 12)
	b.SampleLogProb = make([]float64, len(b.OldLogProb))
	for k := range b.SampleLogProb {
		b.SampleLogProb[k] = b.OldLogProb[k] + 0.3*rng.NormFloat64()
	}
	rc := RolloutCorrectionConfig{RS: "token_k1", RSThreshold: "0.8_1.25"}
	c, err := RolloutCorrection(&rc, b.Offsets, b.ActionMask, b.SampleLogProb, b.OldLogProb)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Metrics["rollout_corr/rollout_rs_masked_fraction"]
	if !(f > 0.1 && f < 0.9) {
		t.Fatalf("rejected fraction %v", f)
	}
	cfg := DefaultLossConfig()
	rej := *b
	applyCorrection(&rej, c)
	got, err := actorLoss(cfg)(&rej)
	if err != nil {
		t.Fatal(err)
	}
	// The reference: the kept tokens alone, as a batch of their own.
	kept := *b
	kept.ActionMask = append([]bool(nil), c.Keep...)
	want, err := actorLoss(cfg)(&kept)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != want.Loss {
		t.Errorf("loss %v, kept tokens alone %v", got.Loss, want.Loss)
	}
	for k, on := range b.ActionMask {
		if on && !c.Keep[k] && got.DLogProb[k] != 0 {
			t.Fatalf("rejected token %d has gradient %v", k, got.DLogProb[k])
		}
	}
	all := RolloutCorrectionConfig{RS: "token_k1", RSThreshold: "1_1"}
	if c, err = RolloutCorrection(&all, b.Offsets, b.ActionMask, b.SampleLogProb, b.OldLogProb); err != nil {
		t.Fatal(err)
	}
	none := *b
	applyCorrection(&none, c)
	if _, err := NewNorm(TokenMean, &none, 0); err == nil {
		t.Error("a batch with every token rejected has a normaliser")
	}
	tr := &Trainer{Cfg: DefaultTrainerConfig(), rc: &rollcorrStep{base: &none}}
	tr.Cfg.Algorithm.RolloutCorrection = all
	if !tr.rollcorrRejectedAll(&none) {
		t.Error("the trainer would not skip a mini-batch whose tokens were all rejected")
	}
}
