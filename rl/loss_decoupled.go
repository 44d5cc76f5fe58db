package rl

import (
	"fmt"
	"math"
)

func init() {
	RegisterLoss("decoupled", DecoupledPPOLoss)
}

// DecoupledPPOLoss is AReaL's decoupled PPO objective (Fu et al., "AReaL",
// ppo_actor_loss_fn with proximal log-probabilities): the behaviour policy
// μ that sampled the tokens (SampleLogProb) is kept apart from the proximal
// policy π_prox that anchors the trust region (OldLogProb, recomputed by the
// trainer). Per masked token, with d = clamp(log π_θ − log π_prox, ±20),
// ρ = e^d and the PPO clipped and dual-clipped loss ℓ^PPO(A, ρ) of PPOLoss:
//
//	b = clamp(log π_prox − log μ, ±20),  w = e^b, or 0 when w > cap (cap > 0)
//	ℓ = w · ℓ^PPO(A, ρ),  dℓ/d log π_θ = w · dℓ^PPO/d log π_θ
//
// The cap is actor.behav_imp_weight_cap (0: none). A token whose weight
// exceeds it leaves the loss's numerator but, as in AReaL, not the
// normaliser. AReaL clamps neither log-ratio; the clamp keeps a token the
// sampler all but ruled out from making the loss infinite.
// Metrics: those of PPOLoss (the ratio to π_prox), and
// actor/behave_imp_weight (mean w over the action tokens, 0 for capped ones),
// actor/behave_approx_kl (mean b over the kept tokens' count of all action
// tokens), actor/behave_mask (share of action tokens under the cap).
// Reads LogProb, OldLogProb, SampleLogProb, Advantages, ActionMask.
func DecoupledPPOLoss(b *Batch, cfg *LossConfig, w Weights, out *Output) error {
	if err := b.require(FieldActionMask, FieldLogProb, FieldOldLogProb, FieldSampleLogProb, FieldAdvantages); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	if err := checkClip(cfg, true); err != nil {
		return err
	}
	if err := checkBehavCap(cfg.BehavImpWeightCap); err != nil {
		return fmt.Errorf("rl: %w", err)
	}
	lo, hi, c, capW := 1-cfg.clipLow(), 1+cfg.clipHigh(), cfg.ClipRatioC, cfg.BehavImpWeightCap
	g, add := out.Grad(GradLogProb)
	m, lp, prox, behav, adv := b.ActionMask, b.LogProb, b.OldLogProb, b.SampleLogProb, b.Advantages
	acc := forChunks(b, 9, func(slo, shi int, acc []float64) {
		var loss, negKL, bad, wsum, bkl float64
		var clipped, lower, n, kept int
		for i := slo; i < shi; i++ {
			s, e := b.Seq(i)
			wi := w[i]
			var seq float64
			for t := s; t < e; t++ {
				if !m[t] {
					if !add {
						g[t] = 0
					}
					continue
				}
				dk, a := lp[t]-prox[t], adv[t]
				chk := dk + a + behav[t]
				bad += chk - chk
				d := clampf(dk, -logRatioClamp, logRatioClamp)
				l, grad, isClip, isLower := ppoToken(a, dk, math.Exp(d), lo, hi, c)
				bk := clampf(prox[t]-behav[t], -logRatioClamp, logRatioClamp)
				bw := math.Exp(bk)
				if capW > 0 && bw > capW {
					bw, bk = 0, 0
				} else {
					kept++
				}
				wsum += bw
				bkl += bk
				seq += bw * l
				negKL -= d
				n++
				if isClip {
					clipped++
				}
				if isLower {
					lower++
				}
				if add {
					g[t] += wi * bw * grad
				} else {
					g[t] = wi * bw * grad
				}
			}
			loss += wi * seq
		}
		acc[0], acc[1], acc[2], acc[3], acc[4], acc[5] = loss, float64(clipped), float64(lower), negKL, float64(n), bad
		acc[6], acc[7], acc[8] = wsum, bkl, float64(kept)
	})
	if acc[5] != 0 {
		return b.firstNonFiniteMasked(FieldLogProb, FieldOldLogProb, FieldSampleLogProb, FieldAdvantages)
	}
	cnt := acc[4] + maskEps
	out.Loss += acc[0]
	out.Metrics["actor/pg_loss"] = acc[0]
	out.Metrics["actor/pg_clipfrac"] = acc[1] / cnt
	out.Metrics["actor/pg_clipfrac_lower"] = acc[2] / cnt
	out.Metrics["actor/ppo_kl"] = acc[3] / cnt
	out.Metrics["actor/behave_imp_weight"] = acc[6] / cnt
	out.Metrics["actor/behave_approx_kl"] = acc[7] / cnt
	out.Metrics["actor/behave_mask"] = acc[8] / cnt
	return nil
}

// checkBehavCap reports a behaviour-weight cap that would reject every
// token the sampler and the trainer agree on: a cap must be 0 (none) or ≥ 1.
func checkBehavCap(c float64) error {
	if c == 0 {
		return nil
	}
	if !(c >= 1) || math.IsInf(c, 0) {
		return fmt.Errorf("behav_imp_weight_cap %v must be 0 (no cap) or a finite number ≥ 1", c)
	}
	return nil
}
