package rl

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// LossConfig holds the actor's loss hyperparameters. Its yaml keys are
// verl's actor.* keys: ActorConfig embeds it, so a key set in the YAML file
// reaches the loss with no copy in between. Defaults and checks sit here.
type LossConfig struct {
	PolicyLoss      string  `yaml:"policy_loss" help:"vanilla (PPO), gspo, or a registered loss"`
	ClipRatio       float64 `yaml:"clip_ratio" help:"PPO clip epsilon"`
	ClipRatioLow    float64 `yaml:"clip_ratio_low" help:"lower clip (0: clip_ratio)"`
	ClipRatioHigh   float64 `yaml:"clip_ratio_high" help:"upper clip (0: clip_ratio; raise for DAPO clip-higher)"`
	ClipRatioC      float64 `yaml:"clip_ratio_c" help:"dual-clip bound for negative advantages (> 1)"`
	AggMode         AggMode `yaml:"loss_agg_mode" help:"token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm"`
	LossScaleFactor float64 `yaml:"loss_scale_factor" help:"L_norm of seq-mean-token-sum-norm (0: the longest sequence)"`
	EntropyCoeff    float64 `yaml:"entropy_coeff" help:"entropy bonus"`
	UseKLLoss       bool    `yaml:"use_kl_loss" help:"add KL(pi||ref) to the loss (GRPO style)"`
	KLLossCoef      float64 `yaml:"kl_loss_coef" help:"weight of the KL loss"`
	KLLossType      string  `yaml:"kl_loss_type" help:"k1, abs, k2, low_var_kl (k3), or a + straight-through variant"`
	// BehavImpWeightCap is the decoupled loss's cap (loss_decoupled.go).
	BehavImpWeightCap float64 `yaml:"behav_imp_weight_cap" help:"policy_loss decoupled: drop tokens whose sampler-to-proximal weight exceeds this (0: no cap, else ≥ 1)"`
}

// DefaultLossConfig returns verl's defaults: the policy loss alone, no KL
// term (DefaultTrainerConfig turns on Agent-R1's KL loss).
func DefaultLossConfig() LossConfig {
	return LossConfig{
		PolicyLoss: "vanilla", ClipRatio: 0.2, ClipRatioC: 3, AggMode: TokenMean,
		KLLossCoef: 0.001, KLLossType: "low_var_kl",
	}
}

// Validate reports a loss setting that cannot work. The clip ratios are
// checked whatever the loss (a registered loss may read them), with the
// dual-clip bound c > 1 that verl asserts.
func (c *LossConfig) Validate() error {
	if _, err := LookupLoss(c.PolicyLoss); err != nil {
		return fmt.Errorf("policy_loss: %w", err)
	}
	for _, r := range []struct {
		key string
		v   float64
	}{{"clip_ratio", c.ClipRatio}, {"clip_ratio_low", c.ClipRatioLow}, {"clip_ratio_high", c.ClipRatioHigh}} {
		if !(r.v >= 0 && r.v < math.Inf(1)) {
			return fmt.Errorf("%s %v must be a finite number ≥ 0", r.key, r.v)
		}
	}
	if lo := c.clipLow(); !(lo < 1) {
		return fmt.Errorf("clip_ratio_low %v (or clip_ratio when it is 0) must be below 1", lo)
	}
	if !(c.ClipRatioC > 1) || math.IsInf(c.ClipRatioC, 0) {
		return fmt.Errorf("clip_ratio_c %v must be a finite number greater than 1 (the dual clip bound)", c.ClipRatioC)
	}
	if _, err := ParseAggMode(string(c.AggMode)); err != nil {
		return fmt.Errorf("loss_agg_mode: %w", err)
	}
	if !(c.LossScaleFactor >= 0) || math.IsInf(c.LossScaleFactor, 0) {
		return fmt.Errorf("loss_scale_factor %v must be a finite number ≥ 0", c.LossScaleFactor)
	}
	for _, r := range []struct {
		key string
		v   float64
	}{{"entropy_coeff", c.EntropyCoeff}, {"kl_loss_coef", c.KLLossCoef}} {
		if math.IsNaN(r.v) || math.IsInf(r.v, 0) {
			return fmt.Errorf("%s %v must be finite", r.key, r.v)
		}
	}
	if _, err := ParseKL(c.KLLossType); err != nil {
		return fmt.Errorf("kl_loss_type: %w", err)
	}
	return checkBehavCap(c.BehavImpWeightCap)
}

func (c *LossConfig) clipLow() float64 {
	if c.ClipRatioLow != 0 {
		return c.ClipRatioLow
	}
	return c.ClipRatio
}

func (c *LossConfig) clipHigh() float64 {
	if c.ClipRatioHigh != 0 {
		return c.ClipRatioHigh
	}
	return c.ClipRatio
}

// checkClip is each clipped loss's own guard on its ratios, for a
// LossConfig that did not come through Validate.
func checkClip(cfg *LossConfig, dual bool) error {
	lo, hi := cfg.clipLow(), cfg.clipHigh()
	if !(lo >= 0 && lo < 1 && hi >= 0) {
		return fmt.Errorf("rl: clip ratios low %v and high %v must satisfy 0 ≤ low < 1, high ≥ 0", lo, hi)
	}
	if dual && !(cfg.ClipRatioC > 1) {
		return fmt.Errorf("rl: dual-clip ratio c = %v must be greater than 1", cfg.ClipRatioC)
	}
	return nil
}

// Weights are the per-sequence aggregation weights w_i of a Norm
// (Norm.SeqWeights): a loss returns Σ_i w_i Σ_t m_t·ℓ_t.
type Weights []float64

// A Loss reads the Batch (each loss documents its fields) and the config,
// aggregates its per-token loss with the weights over the ActionMask, adds
// the result to out.Loss, adds its per-token gradients through out.Grad and
// puts its metrics in out.Metrics. Policy losses and the critic loss share
// this signature, hand-written and autodiff alike. out must have been Reset
// for b's token count (ActorLoss and CriticLoss do that).
type Loss func(b *Batch, cfg *LossConfig, w Weights, out *Output) error

// Output is what a loss returns: the scalar loss, per-token gradients of the
// loss with respect to the model's per-token outputs, and metrics. A gradient
// that no term of the loss depends on is nil. Storage is reused across calls
// on the same Output.
type Output struct {
	Loss     float64
	DLogProb []float64 // [N] dL/d LogProb
	DEntropy []float64 // [N] dL/d Entropy
	DValue   []float64 // [N] dL/d Values
	Metrics  Metrics

	n     int
	store [3][]float64
}

// GradField selects one of Output's gradients.
type GradField int

// The gradients a loss can produce.
const (
	GradLogProb GradField = iota
	GradEntropy
	GradValue
)

// Reset clears the loss, metrics and gradients for a batch of n tokens.
func (o *Output) Reset(n int) {
	o.Loss, o.n = 0, n
	o.DLogProb, o.DEntropy, o.DValue = nil, nil, nil
	o.Metrics = Metrics{}
}

func (o *Output) field(f GradField) *[]float64 {
	switch f {
	case GradLogProb:
		return &o.DLogProb
	case GradEntropy:
		return &o.DEntropy
	case GradValue:
		return &o.DValue
	}
	panic(fmt.Sprintf("rl: no gradient field %d", f))
}

// Grad returns the gradient slice f of length N and whether the caller must
// add to it (true) or may overwrite every entry (false, the first term to
// touch f since Reset). Kernels that overwrite write every token, zeros
// included, which saves a separate zeroing pass.
func (o *Output) Grad(f GradField) (g []float64, add bool) {
	p := o.field(f)
	if *p != nil {
		return *p, true
	}
	s := o.store[f]
	if cap(s) < o.n {
		s = make([]float64, o.n)
	}
	s = s[:o.n]
	o.store[f] = s
	*p = s
	return s, false
}

// ActorLoss computes the actor's loss on a (micro-)batch: the policy loss
// cfg.PolicyLoss, minus EntropyCoeff times the aggregated entropy, plus
// KLLossCoef times the aggregated KL to the reference when UseKLLoss. norm is
// counted on the mini-batch b belongs to (NewNorm). out is reset first.
// Metrics: actor/pg_loss, actor/pg_clipfrac, actor/pg_clipfrac_lower,
// actor/ppo_kl, actor/entropy (when Entropy is set), actor/kl_loss and
// actor/kl_coef (with UseKLLoss). The loss-valued metrics are this call's
// contributions: with the mini-batch's Norm they sum over micro-batches.
func ActorLoss(b *Batch, cfg *LossConfig, norm Norm, out *Output) error {
	pg, err := LookupLoss(cfg.PolicyLoss)
	if err != nil {
		return err
	}
	w, err := weightsFor(b, norm)
	if err != nil {
		return err
	}
	out.Reset(b.NumTokens())
	if err := pg(b, cfg, w, out); err != nil {
		return err
	}
	if b.Entropy != nil || cfg.EntropyCoeff != 0 {
		if err := entropyTerm(b, cfg.EntropyCoeff, w, out); err != nil {
			return err
		}
	}
	if cfg.UseKLLoss {
		kind, err := ParseKL(cfg.KLLossType)
		if err != nil {
			return err
		}
		if err := klLossTerm(b, kind, cfg.KLLossCoef, w, out); err != nil {
			return err
		}
	}
	return nil
}

// CriticLoss computes the clipped value loss on a (micro-)batch (see
// ValueLoss) with the value clip cliprange (critic.cliprange_value); out is
// reset first.
func CriticLoss(b *Batch, cliprange float64, norm Norm, out *Output) error {
	w, err := weightsFor(b, norm)
	if err != nil {
		return err
	}
	out.Reset(b.NumTokens())
	return ValueLoss(b, cliprange, w, out)
}

func weightsFor(b *Batch, norm Norm) (Weights, error) {
	if err := b.require(FieldActionMask); err != nil {
		return nil, err
	}
	w, err := norm.SeqWeights(b, nil)
	return Weights(w), err
}

// checkWeights guards the kernels against a weight slice or an Output
// prepared for another batch.
func checkWeights(b *Batch, w Weights, out *Output) error {
	if len(w) != b.NumSeqs() {
		return fmt.Errorf("rl: %d aggregation weights for %d sequences", len(w), b.NumSeqs())
	}
	if out.n != b.NumTokens() || out.Metrics == nil {
		return fmt.Errorf("rl: Output was Reset for %d tokens, the batch has %d (call out.Reset(b.NumTokens()) first)", out.n, b.NumTokens())
	}
	return nil
}

// entropyTerm adds −coef·Σ w·m·H to the loss and −coef·w·m to dL/dH; the
// metric actor/entropy is the aggregated entropy Σ w·m·H. Reads Entropy.
func entropyTerm(b *Batch, coef float64, w Weights, out *Output) error {
	if err := b.require(FieldEntropy); err != nil {
		return err
	}
	g, add := out.Grad(GradEntropy)
	m, h := b.ActionMask, b.Entropy
	acc := forChunks(b, 2, func(lo, hi int, acc []float64) {
		var sum, bad float64
		for i := lo; i < hi; i++ {
			s, e := b.Seq(i)
			wi := w[i]
			var seq float64
			for t := s; t < e; t++ {
				d := 0.0
				if m[t] {
					seq += h[t]
					bad += h[t] - h[t]
					d = -coef * wi
				}
				if add {
					g[t] += d
				} else {
					g[t] = d
				}
			}
			sum += wi * seq
		}
		acc[0], acc[1] = sum, bad
	})
	if acc[1] != 0 {
		return b.firstNonFiniteMasked(FieldEntropy)
	}
	out.Loss -= coef * acc[0]
	out.Metrics["actor/entropy"] = acc[0]
	return nil
}

// firstNonFiniteMasked reports the first NaN or Inf among the masked tokens
// of the named fields. Kernels call it only after their fused check (a sum of
// x−x, which is 0 for every finite x) saw a non-finite value.
func (b *Batch) firstNonFiniteMasked(fields ...Field) error {
	return b.firstNonFiniteUnder(b.ActionMask, fields...)
}

// firstNonFiniteUnder is firstNonFiniteMasked over the tokens where mask is
// true (the estimators read the advantage mask).
func (b *Batch) firstNonFiniteUnder(mask []bool, fields ...Field) error {
	for _, f := range fields {
		x, _ := b.floats(f)
		for t, v := range x {
			if mask[t] && (math.IsNaN(v) || math.IsInf(v, 0)) {
				return b.badValue(string(f), t, v, false)
			}
		}
	}
	return fmt.Errorf("rl: a result became non-finite with finite inputs (fields %v)", fields)
}

// chunkTokens is the work unit of the loss kernels: runs of whole sequences
// of about this many tokens. The split depends only on the batch layout, never
// on the number of threads, and partial sums are added in chunk order, so a
// loss is bit-for-bit the same on any machine.
const chunkTokens = 1 << 15

// seqChunks splits the sequences of b into consecutive runs [lo, hi) of about
// chunkTokens tokens each.
func seqChunks(b *Batch) [][2]int {
	var out [][2]int
	S := b.NumSeqs()
	lo := 0
	for lo < S {
		hi := lo + 1
		for hi < S && b.Offsets[hi+1]-b.Offsets[lo] <= chunkTokens {
			hi++
		}
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}

// forChunks runs kernel over every chunk of b, in parallel when there are
// several, each chunk with its own accumulator of nacc float64s, and returns
// the accumulators summed in chunk order.
func forChunks(b *Batch, nacc int, kernel func(lo, hi int, acc []float64)) []float64 {
	ch := seqChunks(b)
	accs := make([]float64, len(ch)*nacc)
	workers := min(runtime.GOMAXPROCS(0), len(ch))
	if workers <= 1 {
		for k, c := range ch {
			kernel(c[0], c[1], accs[k*nacc:(k+1)*nacc])
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					k := int(next.Add(1) - 1)
					if k >= len(ch) {
						return
					}
					kernel(ch[k][0], ch[k][1], accs[k*nacc:(k+1)*nacc])
				}
			})
		}
		wg.Wait()
	}
	total := make([]float64, nacc)
	for k := range ch {
		for j := range total {
			total[j] += accs[k*nacc+j]
		}
	}
	return total
}
