package rl

import (
	"fmt"
	"math"
)

func init() {
	RegisterLoss("gspo", GSPOLoss)
}

// gspoLogRatioMax bounds GSPO's sequence log-ratio from above (verl).
const gspoLogRatioMax = 10

// GSPOLoss is the GSPO policy loss (sequence-level importance ratio, verl's
// "gspo"). For sequence i with n_i masked tokens, s_i = exp(min(Σ_t m·(log π_θ
// − log π_old)/max(n_i, 1), 10)); per masked token ℓ = max(−A·s_i,
// −A·clip(s_i, 1−ε_low, 1+ε_high)), no dual clip. The gradient is verl's
// token-level form, dℓ_t/d log π_θ,t = −A_t·s_i where the unclipped branch is
// active: with the sequence mean ratio, each token's share s_i/n_i summed
// over the n_i tokens that carry the same advantage. It therefore equals the
// exact gradient of the sequence-level objective when advantages are constant
// within a sequence (GRPO-family estimators). GSPO's paper objective is
// seq-mean-token-mean aggregation; the configured mode is used as given. GSPO
// clip ranges are small (ε ≈ 3e-4 to 4e-4).
// Metrics: actor/pg_loss, actor/pg_clipfrac, actor/ppo_kl (token-level
// −(log π_θ − log π_old)), actor/pg_clipfrac_lower = 0.
// Reads LogProb, OldLogProb, Advantages, ActionMask.
func GSPOLoss(b *Batch, cfg *LossConfig, w Weights, out *Output) error {
	if err := b.require(FieldActionMask, FieldLogProb, FieldOldLogProb, FieldAdvantages); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	if err := checkClip(cfg, false); err != nil {
		return err
	}
	lo, hi := 1-cfg.clipLow(), 1+cfg.clipHigh()
	g, add := out.Grad(GradLogProb)
	m, lp, old, adv := b.ActionMask, b.LogProb, b.OldLogProb, b.Advantages
	acc := forChunks(b, 5, func(slo, shi int, acc []float64) {
		var loss, negKL, bad float64
		var clipped, n int
		for i := slo; i < shi; i++ {
			s, e := b.Seq(i)
			var sum float64
			cnt := 0
			for t := s; t < e; t++ {
				if m[t] {
					d := lp[t] - old[t]
					sum += d
					cnt++
					chk := d + adv[t]
					bad += chk - chk
				}
			}
			negKL -= sum
			n += cnt
			logRatio := sum / float64(max(cnt, 1))
			inRange := true
			if logRatio > gspoLogRatioMax {
				logRatio, inRange = gspoLogRatioMax, false
			}
			ratio := math.Exp(logRatio)
			clipRatio := clampf(ratio, lo, hi)
			wi := w[i]
			var seq float64
			for t := s; t < e; t++ {
				if !m[t] {
					if !add {
						g[t] = 0
					}
					continue
				}
				a := adv[t]
				l1, l2 := -a*ratio, -a*clipRatio
				l, grad := l1, l1
				if l2 > l1 {
					l, grad = l2, 0
					clipped++
				}
				if !inRange {
					grad = 0
				}
				seq += l
				if add {
					g[t] += wi * grad
				} else {
					g[t] = wi * grad
				}
			}
			loss += wi * seq
		}
		acc[0], acc[1], acc[2], acc[3], acc[4] = loss, float64(clipped), negKL, float64(n), bad
	})
	if acc[4] != 0 {
		return b.firstNonFiniteMasked(FieldLogProb, FieldOldLogProb, FieldAdvantages)
	}
	out.Loss += acc[0]
	n := acc[3] + maskEps
	out.Metrics["actor/pg_loss"] = acc[0]
	out.Metrics["actor/pg_clipfrac"] = acc[1] / n
	out.Metrics["actor/pg_clipfrac_lower"] = 0
	out.Metrics["actor/ppo_kl"] = acc[2] / n
	return nil
}

// ValueLoss is verl's clipped value loss for the critic. Per masked token,
// with V_clip = clamp(V, V_old − ε_v, V_old + ε_v):
//
//	ℓ = ½·max((V − R)², (V_clip − R)²)
//
// dℓ/dV = V − R where the unclipped term is the larger, else 0.
// Metrics: critic/vf_loss (aggregated), critic/vf_clipfrac (masked mean of
// [(V_clip − R)² > (V − R)²]), critic/vpred_mean (masked mean of V).
// Reads Values, OldValues, Returns, ActionMask.
//
// It is no policy loss and not in the loss registry: the critic has one loss.
func ValueLoss(b *Batch, cliprange float64, w Weights, out *Output) error {
	if err := b.require(FieldActionMask, FieldValues, FieldOldValues, FieldReturns); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	if !(cliprange >= 0) {
		return fmt.Errorf("rl: value clip range %v must be ≥ 0", cliprange)
	}
	eps := cliprange
	g, add := out.Grad(GradValue)
	m, v, vold, ret := b.ActionMask, b.Values, b.OldValues, b.Returns
	acc := forChunks(b, 5, func(slo, shi int, acc []float64) {
		var loss, clipped, vsum, n, bad float64
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
				bad += v[t] - v[t] + vold[t] - vold[t] + ret[t] - ret[t]
				l, grad, isClip := valueToken(v[t], vold[t], ret[t], eps)
				if isClip {
					clipped++
				}
				seq += 0.5 * l
				vsum += v[t]
				n++
				if add {
					g[t] += wi * grad
				} else {
					g[t] = wi * grad
				}
			}
			loss += wi * seq
		}
		acc[0], acc[1], acc[2], acc[3], acc[4] = loss, clipped, vsum, n, bad
	})
	if acc[4] != 0 {
		return b.firstNonFiniteMasked(FieldValues, FieldOldValues, FieldReturns)
	}
	out.Loss += acc[0]
	n := acc[3] + maskEps
	out.Metrics["critic/vf_loss"] = acc[0]
	out.Metrics["critic/vf_clipfrac"] = acc[1] / n
	out.Metrics["critic/vpred_mean"] = acc[2] / n
	return nil
}

// valueToken is the clipped value loss of one token before the ½: value v,
// old value vold, return r, clip range eps; grad is d(½ℓ)/dv.
func valueToken(v, vold, r, eps float64) (l, grad float64, clipped bool) {
	vc := clampf(v, vold-eps, vold+eps)
	d1, d2 := v-r, vc-r
	l1, l2 := d1*d1, d2*d2
	if l2 > l1 {
		return l2, 0, true
	}
	return l1, d1, false
}
