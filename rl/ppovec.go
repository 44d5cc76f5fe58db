package rl

import "math"

// ppoVecConsts holds the vector loop's constants, each broadcast to four
// lanes; the field order is the offset table in ppovec_amd64.s.
type ppoVecConsts struct {
	negClamp, posClamp [4]float64
	log2e, ln2Hi       [4]float64
	ln2Lo              [4]float64
	poly               [14][4]float64 // 1/13!, 1/12!, ..., 1/1!, 1
	lo, hi, dual, w    [4]float64
	one                [4]float64
}

func splat(x float64) [4]float64 { return [4]float64{x, x, x, x} }

func newPPOVecConsts(lo, hi, c float64) *ppoVecConsts {
	k := &ppoVecConsts{
		negClamp: splat(-logRatioClamp), posClamp: splat(logRatioClamp),
		log2e: splat(math.Log2E), ln2Hi: splat(6.93147180369123816490e-01), ln2Lo: splat(1.90821492927058770002e-10),
		lo: splat(lo), hi: splat(hi), dual: splat(c), one: splat(1),
	}
	// Taylor coefficients of e^r for |r| ≤ ln2/2: the r^14 term is below 5e-18.
	fact := 1.0
	for j := 1; j <= 13; j++ {
		fact *= float64(j)
	}
	for j := range 14 {
		k.poly[j] = splat(1 / fact) // 1/(13−j)!
		if d := float64(13 - j); d > 0 {
			fact /= d
		}
	}
	return k
}

// ppoSeqVec runs the vanilla PPO loss over tokens [s, e) of one sequence
// with weight wi, overwriting g there: whole groups of eight in the AVX-512
// loop where the CPU has it, else groups of four in the AVX2 loop, the rest
// with ppoToken. It returns the sequence's Σ ℓ and adds to the
// chunk's counters.
func ppoSeqVec(k *ppoVecConsts, m []bool, lp, old, adv, g []float64, s, e int, wi float64,
	negKL, bad *float64, n, clipped, lower *int) float64 {
	var seq float64
	n4 := (e - s) &^ 3
	k.w = splat(wi)
	if useAVX512 {
		n4 = (e - s) &^ 7
		if n4 > 0 {
			var acc [6][8]float64
			ppoVecAVX512(&m[s], &lp[s], &old[s], &adv[s], &g[s], n4, k, &acc)
			lane := func(j int) (x float64) {
				for _, v := range acc[j] {
					x += v
				}
				return x
			}
			seq = lane(0)
			*negKL -= lane(1)
			*bad += lane(2)
			*n += int(lane(3))
			*clipped += int(lane(4))
			*lower += int(lane(5))
		}
	} else if n4 > 0 {
		var acc [6][4]float64
		ppoVecAVX2(&m[s], &lp[s], &old[s], &adv[s], &g[s], n4, k, &acc)
		lane := func(j int) float64 { return acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3] }
		seq = lane(0)
		*negKL -= lane(1)
		*bad += lane(2)
		*n += int(lane(3))
		*clipped += int(lane(4))
		*lower += int(lane(5))
	}
	lo, hi, c := k.lo[0], k.hi[0], k.dual[0]
	for t := s + n4; t < e; t++ {
		if !m[t] {
			g[t] = 0
			continue
		}
		dk, a := lp[t]-old[t], adv[t]
		chk := dk + a
		*bad += chk - chk
		l, grad, isClip, isLower := ppoToken(a, dk, math.Exp(clampf(dk, -logRatioClamp, logRatioClamp)), lo, hi, c)
		seq += l
		*negKL -= clampf(dk, -logRatioClamp, logRatioClamp)
		*n++
		if isClip {
			*clipped++
		}
		if isLower {
			*lower++
		}
		g[t] = wi * grad
	}
	return seq
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

// ppoFullConsts extends ppoVecConsts for ppoFullVecAVX2; the field order is
// the offset table in ppovec_amd64.s.
type ppoFullConsts struct {
	ppoVecConsts
	entGrad, klW  [4]float64 // −entCoef·w, klCoef·w
	outer         [4]float64 // k3's upper clamp
	straight      [4]float64 // all bits set for the straight-through gradient
	clipCountUnit [4]float64 // 2^26: clip counts share a lane with token counts
}

const clipCountUnit = 1 << 26

// ppoSeqFullVec is ppoSeqVec with the entropy bonus and, when kl, the k3 KL
// loss (straight-through when st): tokens [s, e) of one sequence with weight
// wi; g and ge are overwritten there. It returns the sequence's Σ ℓ, Σ H and
// Σ k3 and adds to the chunk's counters.
func ppoSeqFullVec(k *ppoFullConsts, m []bool, lp, old, adv, ent, ref, g, ge []float64, s, e int, wi, entCoef, klCoef float64, kl, st bool,
	negKL, bad *float64, n, clipped, lower *int) (pg, h, kv float64) {
	n4 := (e - s) &^ 3
	if useAVX512 {
		n4 = (e - s) &^ 7
	}
	if n4 > 0 {
		k.w, k.entGrad, k.klW = splat(wi), splat(-entCoef*wi), splat(klCoef*wi)
		refP := &lp[s]
		if kl {
			refP = &ref[s]
		}
		var acc [6][8]float64 // AVX2 fills lanes 0-3 of each row
		if useAVX512 {
			ppoFullVecAVX512(&m[s], &lp[s], &old[s], &adv[s], &ent[s], refP, &g[s], &ge[s], n4, k, &acc)
		} else {
			var acc4 [6][4]float64
			ppoFullVecAVX2(&m[s], &lp[s], &old[s], &adv[s], &ent[s], refP, &g[s], &ge[s], n4, k, &acc4)
			for j := range acc4 {
				copy(acc[j][:4], acc4[j][:])
			}
		}
		lane := func(j int) (x float64) {
			for _, v := range acc[j] {
				x += v
			}
			return x
		}
		pg, h, kv = lane(0), lane(4), lane(5)
		*negKL -= lane(1)
		for _, v := range acc[2] {
			c := math.Floor(v / clipCountUnit)
			*clipped += int(c)
			*n += int(v - c*clipCountUnit)
		}
		*lower += int(lane(3))
	}
	lo, hi, c := k.lo[0], k.hi[0], k.dual[0]
	kind := KLType{Estimator: KLK3, StraightThrough: st}
	for t := s + n4; t < e; t++ {
		if !m[t] {
			g[t], ge[t] = 0, 0
			continue
		}
		dk, a := lp[t]-old[t], adv[t]
		chk := dk + a
		*bad += chk - chk
		l, grad, isClip, isLower := ppoToken(a, dk, math.Exp(clampf(dk, -logRatioClamp, logRatioClamp)), lo, hi, c)
		pg += l
		*negKL -= clampf(dk, -logRatioClamp, logRatioClamp)
		*n++
		if isClip {
			*clipped++
		}
		if isLower {
			*lower++
		}
		gv := wi * grad
		if kl {
			kt, dkt := kind.Eval(lp[t], ref[t])
			kv += kt
			gv += klCoef * wi * dkt
			*bad += ref[t] - ref[t]
		}
		g[t] = gv
		h += ent[t]
		ge[t] = -entCoef * wi
	}
	return pg, h, kv
}

// valueVecConsts are valueVecAVX2's constants: the value clip ε, the
// sequence weight and 1.0, four lanes each.
type valueVecConsts struct {
	eps, w, one [4]float64
}

// valueSeqVec runs the clipped value loss over tokens [s, e) of one sequence
// with weight wi, overwriting g there, and returns the sequence's Σ ℓ
// (before the ½) and adds to the chunk's sums.
func valueSeqVec(k *valueVecConsts, m []bool, v, vold, ret, g []float64, s, e int, wi float64,
	clipped, vsum, n, bad *float64) float64 {
	var seq float64
	n4 := (e - s) &^ 3
	if n4 > 0 {
		var acc [4][4]float64
		k.w = splat(wi)
		valueVecAVX2(&m[s], &v[s], &vold[s], &ret[s], &g[s], n4, k, &acc)
		lane := func(j int) float64 { return acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3] }
		seq = lane(0)
		*clipped += lane(1)
		*vsum += lane(2)
		*n += lane(3)
	}
	eps := k.eps[0]
	for t := s + n4; t < e; t++ {
		if !m[t] {
			g[t] = 0
			continue
		}
		*bad += v[t] - v[t] + vold[t] - vold[t] + ret[t] - ret[t]
		l, grad, isClip := valueToken(v[t], vold[t], ret[t], eps)
		if isClip {
			*clipped++
		}
		seq += l
		*vsum += v[t]
		*n++
		g[t] = wi * grad
	}
	return seq
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

// gspoVecConsts are gspoLossAVX2's constants: the sequence ratio, its
// clipped value, the gradient weight and 1.0, four lanes each.
type gspoVecConsts struct {
	ratio, clipped, gw, one [4]float64
}

// gspoSeqSum returns Σ on·(lp − old), the finiteness sum and the count of
// action tokens over [s, e): the AVX2 loop for whole groups of four.
func gspoSeqSum(m []bool, lp, old, adv []float64, s, e int) (sum, bad float64, cnt int) {
	n4 := (e - s) &^ 3
	if useAVX512 {
		n4 = (e - s) &^ 7
	}
	if n4 > 0 {
		var acc [3][8]float64 // AVX2 fills lanes 0-3
		if useAVX512 {
			gspoSumAVX512(&m[s], &lp[s], &old[s], &adv[s], n4, &acc)
		} else {
			var acc4 [3][4]float64
			gspoSumAVX2(&m[s], &lp[s], &old[s], &adv[s], n4, &acc4)
			for j := range acc4 {
				copy(acc[j][:4], acc4[j][:])
			}
		}
		sum, bad, cnt = sum8(acc[0]), sum8(acc[1]), int(sum8(acc[2]))
	}
	for t := s + n4; t < e; t++ {
		if m[t] {
			d := lp[t] - old[t]
			sum += d
			cnt++
			chk := d + adv[t]
			bad += chk - chk
		}
	}
	return sum, bad, cnt
}

// gspoSeqLoss writes GSPO's gradient over [s, e) (overwriting g) and
// returns Σ on·ℓ and the clip count; gw is the weight, 0 when the sequence
// log-ratio was clamped.
func gspoSeqLoss(k *gspoVecConsts, m []bool, adv, g []float64, s, e int, ratio, clipped, gw float64) (seq float64, clips int) {
	n4 := (e - s) &^ 3
	if useAVX512 {
		n4 = (e - s) &^ 7
	}
	if n4 > 0 {
		var acc [2][8]float64 // AVX2 fills lanes 0-3
		k.ratio, k.clipped, k.gw = splat(ratio), splat(clipped), splat(gw)
		if useAVX512 {
			gspoLossAVX512(&m[s], &adv[s], &g[s], n4, k, &acc)
		} else {
			var acc4 [2][4]float64
			gspoLossAVX2(&m[s], &adv[s], &g[s], n4, k, &acc4)
			for j := range acc4 {
				copy(acc[j][:4], acc4[j][:])
			}
		}
		seq, clips = sum8(acc[0]), int(sum8(acc[1]))
	}
	for t := s + n4; t < e; t++ {
		if !m[t] {
			g[t] = 0
			continue
		}
		a := adv[t]
		l1, l2 := -a*ratio, -a*clipped
		l, grad := l1, l1
		if l2 > l1 {
			l, grad = l2, 0
			clips++
		}
		seq += l
		g[t] = gw * grad
	}
	return seq, clips
}

// sum8 adds the lanes of a vector accumulator.
func sum8(x [8]float64) (s float64) {
	for _, v := range x {
		s += v
	}
	return s
}

// KernelISA names the instruction set the loss kernels use on this machine:
// "avx512", "avx2" or "scalar".
func KernelISA() string {
	switch {
	case useAVX512:
		return "avx512"
	case useAVX2:
		return "avx2"
	}
	return "scalar"
}
