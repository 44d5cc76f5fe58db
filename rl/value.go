package rl

import "fmt"

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
