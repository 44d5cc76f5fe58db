package rl

import "math"

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
