package rl

import "math"

func init() {
	RegisterLoss("vanilla", PPOLoss)
}

// logRatioClamp bounds log π_θ − log π_old before the exponential (verl).
const logRatioClamp = 20

// PPOLoss is verl's "vanilla" policy loss: the PPO clipped surrogate with
// separate low and high clip ranges and the dual clip. Per masked token, with
// d = clamp(log π_θ − log π_old, ±20) and ρ = e^d:
//
//	ℓ1 = −A·ρ, ℓ2 = −A·clip(ρ, 1−ε_low, 1+ε_high), ℓc = max(ℓ1, ℓ2)
//	ℓ  = min(ℓc, −A·c) if A < 0, else ℓc
//
// dℓ/d log π_θ = −A·ρ where the unclipped branch is the active one and 0
// where the clip or the dual clip wins or |d| > 20.
// Metrics (masked means over this batch): actor/pg_clipfrac = [ℓ2 > ℓ1],
// actor/pg_clipfrac_lower = [ℓc > −A·c, A < 0], actor/ppo_kl = −d;
// actor/pg_loss = the aggregated loss.
// Reads LogProb, OldLogProb, Advantages, ActionMask.
//
// It is an ordinary registry entry: ActorLoss adds the entropy and KL terms
// after it as it does for any policy loss. The loss head is about 1e-6 of an
// actor update (benchmarks/rl.md, -step), so a plain scalar loop is enough.
func PPOLoss(b *Batch, cfg *LossConfig, w Weights, out *Output) error {
	if err := b.require(FieldActionMask, FieldLogProb, FieldOldLogProb, FieldAdvantages); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	if err := checkClip(cfg, true); err != nil {
		return err
	}
	lo, hi, c := 1-cfg.clipLow(), 1+cfg.clipHigh(), cfg.ClipRatioC
	g, add := out.Grad(GradLogProb)
	m, lp, old, adv := b.ActionMask, b.LogProb, b.OldLogProb, b.Advantages
	acc := forChunks(b, 6, func(slo, shi int, acc []float64) {
		var loss, negKL, bad float64
		var clipped, lower, n int
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
				dk, a := lp[t]-old[t], adv[t]
				// x − x is 0 for finite x and NaN for NaN or ±Inf.
				chk := dk + a
				bad += chk - chk
				d := clampf(dk, -logRatioClamp, logRatioClamp)
				l, grad, isClip, isLower := ppoToken(a, dk, math.Exp(d), lo, hi, c)
				seq += l
				negKL -= d
				n++
				if isClip {
					clipped++
				}
				if isLower {
					lower++
				}
				if add {
					g[t] += wi * grad
				} else {
					g[t] = wi * grad
				}
			}
			loss += wi * seq
		}
		acc[0], acc[1], acc[2], acc[3], acc[4], acc[5] = loss, float64(clipped), float64(lower), negKL, float64(n), bad
	})
	if acc[5] != 0 {
		return b.firstNonFiniteMasked(FieldLogProb, FieldOldLogProb, FieldAdvantages)
	}
	cnt := acc[4] + maskEps
	out.Loss += acc[0]
	out.Metrics["actor/pg_loss"] = acc[0]
	out.Metrics["actor/pg_clipfrac"] = acc[1] / cnt
	out.Metrics["actor/pg_clipfrac_lower"] = acc[2] / cnt
	out.Metrics["actor/ppo_kl"] = acc[3] / cnt
	return nil
}

// ppoToken is the vanilla PPO loss of one token: log-ratio dk, ratio
// r = e^clamp(dk, ±20), clip range [lo, hi], dual-clip bound c.
func ppoToken(a, dk, r, lo, hi, c float64) (l, grad float64, clipped, lower bool) {
	l1 := -a * r
	l2 := -a * clampf(r, lo, hi)
	l, grad = l1, l1
	if l2 > l1 {
		l, grad, clipped = l2, 0, true
	}
	if a < 0 {
		if l3 := -a * c; l > l3 {
			l, grad, lower = l3, 0, true
		}
	}
	if dk > logRatioClamp || dk < -logRatioClamp {
		grad = 0
	}
	return l, grad, clipped, lower
}

// clampf bounds x to [lo, hi] with plain comparisons: the builtin min and max
// order NaN and signed zeros, which costs branches in the loss loops. A NaN x
// passes through unchanged (the losses' finiteness checks catch it).
func clampf(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}
