package rl

import "math"

// blockLen is the number of tokens the fused kernel handles per step: small
// enough that its scratch arrays stay in L1, large enough to amortise the
// call into expDiffBlock.
const blockLen = 256

// actorTerms are the terms ActorLoss fuses into the PPO pass, so the whole
// actor loss reads each input once.
type actorTerms struct {
	entropy bool    // subtract entCoef·agg(Entropy)
	entCoef float64 //
	kl      bool    // add klCoef·agg(k(LogProb, RefLogProb))
	klKind  KLType
	klCoef  float64
}

// ppoFused is PPOLoss plus the optional entropy and KL-loss terms in one
// pass over the tokens. The plain loss, and the loss with the entropy bonus
// and optionally the k3 KL loss, run the vector loops of ppovec.go when the
// CPU has AVX2 and the gradients are written rather than added to. Every
// other case runs the scalar loop below, in blocks of blockLen tokens:
// expDiffBlock exponentiates the block's clamped log-ratios (and k3's
// exponents), then one loop checks finiteness and computes losses and
// gradients. The formulas are those of PPOLoss, entropyTerm and klLossTerm.
func ppoFused(b *Batch, cfg *LossConfig, w Weights, out *Output, x actorTerms) error {
	fields := []Field{FieldActionMask, FieldLogProb, FieldOldLogProb, FieldAdvantages}
	if x.entropy {
		fields = append(fields, FieldEntropy)
	}
	if x.kl {
		fields = append(fields, FieldRefLogProb)
	}
	if err := b.require(fields...); err != nil {
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
	var ge []float64
	var addE bool
	if x.entropy {
		ge, addE = out.Grad(GradEntropy)
	}
	k3 := x.kl && x.klKind.Estimator == KLK3
	m, lp, old, adv, ent, ref := b.ActionMask, b.LogProb, b.OldLogProb, b.Advantages, b.Entropy, b.RefLogProb

	const (
		aLoss = iota
		aClipped
		aLower
		aNegKL
		aCount
		aBad
		aEntropy
		aKL
		nAcc
	)
	vec := useAVX2 && !add && !x.entropy && !x.kl
	fullVec := useAVX2 && !add && x.entropy && !addE && (!x.kl || x.klKind.Estimator == KLK3)
	acc := forChunks(b, nAcc, func(slo, shi int, acc []float64) {
		var loss, negKL, bad, entSum, klSum float64
		var clipped, lower, n int // integer counters: no float add latency chain
		if fullVec {
			k := &ppoFullConsts{ppoVecConsts: *newPPOVecConsts(lo, hi, c), outer: splat(k3OuterClamp), clipCountUnit: splat(clipCountUnit)}
			if x.klKind.StraightThrough {
				k.straight = splat(math.Float64frombits(^uint64(0)))
			}
			for i := slo; i < shi; i++ {
				s, e := b.Seq(i)
				pg, h, kv := ppoSeqFullVec(k, m, lp, old, adv, ent, ref, g, ge, s, e, w[i], x.entCoef, x.klCoef, x.kl, x.klKind.StraightThrough,
					&negKL, &bad, &n, &clipped, &lower)
				loss += w[i] * pg
				entSum += w[i] * h
				klSum += w[i] * kv
			}
			// A non-finite input on a model token makes one of the sums
			// non-finite; the caller then locates it.
			bad += loss - loss + entSum - entSum + klSum - klSum
			acc[aLoss], acc[aClipped], acc[aLower], acc[aNegKL] = loss, float64(clipped), float64(lower), negKL
			acc[aCount], acc[aBad], acc[aEntropy], acc[aKL] = float64(n), bad, entSum, klSum
			return
		}
		if vec {
			k := newPPOVecConsts(lo, hi, c)
			for i := slo; i < shi; i++ {
				s, e := b.Seq(i)
				loss += w[i] * ppoSeqVec(k, m, lp, old, adv, g, s, e, w[i], &negKL, &bad, &n, &clipped, &lower)
			}
			acc[aLoss], acc[aClipped], acc[aLower], acc[aNegKL] = loss, float64(clipped), float64(lower), negKL
			acc[aCount], acc[aBad] = float64(n), bad
			return
		}
		var ratio, kexp [blockLen]float64
		for i := slo; i < shi; i++ {
			s, e := b.Seq(i)
			wi := w[i]
			var seqPG, seqEnt, seqKL float64
			for bs := s; bs < e; bs += blockLen {
				be := min(bs+blockLen, e)
				nb := be - bs
				mB, lpB, oldB, aB, gB := m[bs:be], lp[bs:be:be], old[bs:be:be], adv[bs:be:be], g[bs:be:be]
				var entB, geB, refB []float64
				if x.entropy {
					entB, geB = ent[bs:be:be], ge[bs:be:be]
				}
				if x.kl {
					refB = ref[bs:be:be]
				}
				// e^clamp(log π − log π_old) and k3's e^clamp(log π_ref − log π)
				// for the whole block; masked-out entries are computed and ignored.
				expDiffBlock(ratio[:nb], lpB, oldB, logRatioClamp)
				if k3 {
					expDiffBlock(kexp[:nb], refB, lpB, k3InnerClamp)
				}
				for k, on := range mB {
					if !on {
						if !add {
							gB[k] = 0
						}
						if x.entropy && !addE {
							geB[k] = 0
						}
						continue
					}
					a, r, dk := aB[k], ratio[k], lpB[k]-oldB[k]
					// x − x is 0 for finite x and NaN for NaN or ±Inf.
					chk := dk + a
					bad += chk - chk
					l1 := -a * r
					l2 := -a * clampf(r, lo, hi)
					lc, grad := l1, l1
					if l2 > l1 {
						lc, grad = l2, 0
						clipped++
					}
					if a < 0 {
						if l3 := -a * c; lc > l3 {
							lc, grad = l3, 0
							lower++
						}
					}
					if dk > logRatioClamp || dk < -logRatioClamp {
						grad = 0
					}
					seqPG += lc
					negKL -= clampf(dk, -logRatioClamp, logRatioClamp)
					n++
					gv := wi * grad
					if x.kl {
						p, q := lpB[k], refB[k]
						bad += q - q
						var kv, dkv float64
						switch x.klKind.Estimator {
						case KLK1:
							kv, dkv = p-q, 1
						case KLAbs:
							kv = p - q
							if kv < 0 {
								kv, dkv = -kv, -1
							} else if kv > 0 {
								dkv = 1
							}
						case KLK2:
							kv, dkv = 0.5*(p-q)*(p-q), p-q
						case KLK3:
							ex, qp := kexp[k], q-p
							kv = ex - clampf(qp, -k3InnerClamp, k3InnerClamp) - 1
							if qp >= -k3InnerClamp && qp <= k3InnerClamp {
								dkv = 1 - ex
							}
							if kv > k3OuterClamp {
								kv, dkv = k3OuterClamp, 0
							}
						}
						if x.klKind.StraightThrough {
							dkv = p - q
						}
						seqKL += kv
						gv += x.klCoef * wi * dkv
					}
					if add {
						gB[k] += gv
					} else {
						gB[k] = gv
					}
					if x.entropy {
						bad += entB[k] - entB[k]
						seqEnt += entB[k]
						if addE {
							geB[k] -= x.entCoef * wi
						} else {
							geB[k] = -x.entCoef * wi
						}
					}
				}
			}
			loss += wi * seqPG
			entSum += wi * seqEnt
			klSum += wi * seqKL
		}
		acc[aLoss], acc[aClipped], acc[aLower], acc[aNegKL] = loss, float64(clipped), float64(lower), negKL
		acc[aCount], acc[aBad], acc[aEntropy], acc[aKL] = float64(n), bad, entSum, klSum
	})
	if acc[aBad] != 0 {
		return b.firstNonFiniteMasked(fields[1:]...)
	}
	cnt := acc[aCount] + maskEps
	out.Loss += acc[aLoss]
	out.Metrics["actor/pg_loss"] = acc[aLoss]
	out.Metrics["actor/pg_clipfrac"] = acc[aClipped] / cnt
	out.Metrics["actor/pg_clipfrac_lower"] = acc[aLower] / cnt
	out.Metrics["actor/ppo_kl"] = acc[aNegKL] / cnt
	if x.entropy {
		out.Loss -= x.entCoef * acc[aEntropy]
		out.Metrics["actor/entropy"] = acc[aEntropy]
	}
	if x.kl {
		out.Loss += x.klCoef * acc[aKL]
		out.Metrics["actor/kl_loss"] = acc[aKL]
		out.Metrics["actor/kl_coef"] = x.klCoef
	}
	return nil
}

// clampf bounds x to [lo, hi] with plain comparisons: the builtin min and max
// order NaN and signed zeros, which costs branches in the hot loops. A NaN x
// passes through unchanged (the kernels' finiteness checks catch it).
func clampf(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// The loss kernels spend most of their arithmetic in exp (the importance
// ratio, the k3 estimator). math.Exp is accurate but costs several times a
// memory pass per token, so the kernels exponentiate blocks of values with
// expDiffBlock: a table-driven exp with the same accuracy class (within 3 ulp of
// math.Exp over the kernels' range, fastexp_test.go) whose independent
// iterations overlap in the CPU.

const (
	expTableBits = 6
	expTableSize = 1 << expTableBits
	expInvLn2N   = expTableSize / math.Ln2
	// fdlibm's two-part ln 2 divided by the table size: the high part has
	// trailing zero bits, so k·expLn2NHi is exact for the k in range.
	expLn2NHi = 6.93147180369123816490e-01 / expTableSize
	expLn2NLo = 1.90821492927058770002e-10 / expTableSize
	// expShifter rounds to an integer when added: 1.5·2^52.
	expShifter = 0x1.8p52
	// expLimit keeps arguments where the result is a normal float64.
	expLimit = 700
)

// expTable[j] = 2^(j/64).
var expTable = func() (t [expTableSize]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / expTableSize)
	}
	return t
}()

// expDiffBlock sets dst[i] = e^clamp(a[i] − b[i], ±lim) for i < len(dst),
// lim ≤ 700. A NaN difference gives an unspecified dst[i]; the kernels
// reject NaN inputs through their own checks before using the result.
//
// e^x = 2^(k/64)·e^r with k = round(64x/ln 2) and |r| ≤ ln2/128; e^r is a
// degree-6 Taylor polynomial (truncation below 4e-17), 2^(k/64) a table entry
// times 2^(k>>6) added to the exponent bits.
func expDiffBlock(dst, a, b []float64, lim float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		x := clampf(a[i]-b[i], -lim, lim)
		kf := x*expInvLn2N + expShifter
		k := math.Float64bits(kf)
		kf -= expShifter
		r := x - kf*expLn2NHi - kf*expLn2NLo
		p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
		dst[i] = math.Float64frombits(math.Float64bits(expTable[k%expTableSize]*p) + (k>>expTableBits)<<52)
	}
}
