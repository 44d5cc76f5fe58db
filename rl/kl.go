package rl

import (
	"fmt"
	"math"
	"strings"
)

// KLEstimator is the per-token estimator of KL(π ‖ π_ref) from the two
// log-probs p = log π and q = log π_ref (verl's kl_penalty names).
type KLEstimator int

// The estimators.
const (
	KLK1  KLEstimator = iota // "kl", "k1": p − q
	KLAbs                    // "abs": |p − q|
	KLK2                     // "mse", "k2": ½(p − q)²
	KLK3                     // "low_var_kl", "k3": e^d − d − 1 with d = clamp(q − p, ±20), clamped to [−10, 10]
)

// KLType is an estimator and whether it is straight-through: the "+" variants
// ("k1+", "k3+", ...) keep the estimator's value but take the gradient of k2,
// p − q, which is an unbiased gradient of the KL (verl documents the intent).
type KLType struct {
	Estimator       KLEstimator
	StraightThrough bool
}

// ParseKL returns the KLType named s: kl/k1, abs, mse/k2, low_var_kl/k3, each
// optionally followed by "+".
func ParseKL(s string) (KLType, error) {
	base, plus := strings.CutSuffix(s, "+")
	var e KLEstimator
	switch base {
	case "kl", "k1":
		e = KLK1
	case "abs":
		e = KLAbs
	case "mse", "k2":
		e = KLK2
	case "low_var_kl", "k3":
		e = KLK3
	default:
		return KLType{}, fmt.Errorf("rl: unknown KL estimator %q (want kl/k1, abs, mse/k2, low_var_kl/k3, optionally with \"+\")", s)
	}
	return KLType{Estimator: e, StraightThrough: plus}, nil
}

const (
	k3InnerClamp = 20 // bound on q − p before the exponential
	k3OuterClamp = 10 // bound on the k3 value
)

// Eval returns the estimate and its derivative with respect to p. Clamps pass
// no gradient outside their range (inclusive bounds pass it, as torch.clamp).
func (k KLType) Eval(p, q float64) (value, dp float64) {
	d := p - q
	switch k.Estimator {
	case KLK1:
		value, dp = d, 1
	case KLAbs:
		value = math.Abs(d)
		switch {
		case d > 0:
			dp = 1
		case d < 0:
			dp = -1
		}
	case KLK2:
		value, dp = 0.5*d*d, d
	case KLK3:
		x := -d
		inner := true
		if x > k3InnerClamp {
			x, inner = k3InnerClamp, false
		} else if x < -k3InnerClamp {
			x, inner = -k3InnerClamp, false
		}
		ex := math.Exp(x)
		value = ex - x - 1
		// d/dp (e^x − x − 1) with x = q − p is −(e^x − 1).
		if inner {
			dp = 1 - ex
		}
		if value > k3OuterClamp {
			value, dp = k3OuterClamp, 0
		} else if value < -k3OuterClamp {
			value, dp = -k3OuterClamp, 0
		}
	}
	if k.StraightThrough {
		dp = d
	}
	return value, dp
}

// klLossTerm adds coef·Σ w·m·k(LogProb, RefLogProb) to the loss and its
// gradient to dL/d LogProb. Metrics actor/kl_loss (the aggregated KL) and
// actor/kl_coef. Reads LogProb, RefLogProb, ActionMask.
func klLossTerm(b *Batch, kind KLType, coef float64, w Weights, out *Output) error {
	if err := b.require(FieldLogProb, FieldRefLogProb); err != nil {
		return err
	}
	g, add := out.Grad(GradLogProb)
	m, p, q := b.ActionMask, b.LogProb, b.RefLogProb
	acc := forChunks(b, 2, func(lo, hi int, acc []float64) {
		var sum, bad float64
		for i := lo; i < hi; i++ {
			s, e := b.Seq(i)
			cw := coef * w[i]
			var seq float64
			for t := s; t < e; t++ {
				var d float64
				if m[t] {
					bad += p[t] - p[t] + q[t] - q[t]
					k, dk := kind.Eval(p[t], q[t])
					seq += k
					d = cw * dk
				}
				if add {
					g[t] += d
				} else {
					g[t] = d
				}
			}
			sum += w[i] * seq
		}
		acc[0], acc[1] = sum, bad
	})
	if acc[1] != 0 {
		return b.firstNonFiniteMasked(FieldLogProb, FieldRefLogProb)
	}
	out.Loss += coef * acc[0]
	out.Metrics["actor/kl_loss"] = acc[0]
	out.Metrics["actor/kl_coef"] = coef
	return nil
}

// KLController supplies β for the KL penalty in the reward and adapts it
// after each step.
type KLController interface {
	Value() float64
	// Update adapts β to the observed KL of a step of nSteps sequences.
	Update(currentKL float64, nSteps int)
}

// FixedKL keeps β constant (verl kl_ctrl.type fixed).
type FixedKL struct{ Coef float64 }

// Value returns β.
func (c *FixedKL) Value() float64 { return c.Coef }

// Update does nothing.
func (c *FixedKL) Update(float64, int) {}

// AdaptiveKL is verl's adaptive controller: β ← β·(1 + clip(KL/target − 1,
// −0.2, 0.2)·nSteps/horizon).
type AdaptiveKL struct {
	Coef    float64 // current β
	Target  float64 // target KL (verl default 0.1)
	Horizon float64 // horizon in sequences (verl default 10000)
}

// Value returns β.
func (c *AdaptiveKL) Value() float64 { return c.Coef }

// Update moves β towards the target KL.
func (c *AdaptiveKL) Update(currentKL float64, nSteps int) {
	e := min(max(currentKL/c.Target-1, -0.2), 0.2)
	c.Coef *= 1 + e*float64(nSteps)/c.Horizon
}

// ApplyKLPenalty sets Rewards = Scores − β·m·k(OldLogProb, RefLogProb), the
// KL in the reward of PPO and REINFORCE++ (verl apply_kl_penalty; the KL is
// masked by the action mask as in Agent-R1). It then updates ctrl with the
// batch KL, the mean over sequences of each sequence's masked mean KL, and
// returns the metrics actor/reward_kl_penalty (that KL) and
// actor/reward_kl_penalty_coeff (the β used). Reads Scores, OldLogProb,
// RefLogProb, ActionMask.
func ApplyKLPenalty(b *Batch, kind KLType, ctrl KLController) (Metrics, error) {
	if err := b.Validate(FieldActionMask, FieldScores, FieldOldLogProb, FieldRefLogProb); err != nil {
		return nil, err
	}
	beta := ctrl.Value()
	b.Rewards = zeroed(b.Rewards, b.NumTokens())
	var total float64
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		var sum, n float64
		for t := s; t < e; t++ {
			b.Rewards[t] = b.Scores[t]
			if b.ActionMask[t] {
				k, _ := kind.Eval(b.OldLogProb[t], b.RefLogProb[t])
				b.Rewards[t] -= beta * k
				sum += k
				n++
			}
		}
		total += sum / (n + maskEps)
	}
	current := 0.0
	if b.NumSeqs() > 0 {
		current = total / float64(b.NumSeqs())
	}
	ctrl.Update(current, b.NumSeqs())
	return Metrics{"actor/reward_kl_penalty": current, "actor/reward_kl_penalty_coeff": beta}, nil
}
