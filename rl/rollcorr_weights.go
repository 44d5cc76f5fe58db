package rl

import "math"

// Correction is what RolloutCorrection computes for a packed batch.
type Correction struct {
	// Weights [N] are the truncated (and, with batch normalisation,
	// normalised) importance weights, 0 off the action mask; nil when
	// rollout_is is off.
	Weights []float64
	// Keep [N] is the action mask less the rejected tokens; nil when
	// rollout_rs is off.
	Keep []bool
	// Metrics are verl's rollout_corr/rollout_is_* and rollout_rs_* figures.
	Metrics Metrics
}

// RolloutCorrection computes the importance weights and the rejection mask
// of cfg (see rollcorr.go for the formulas) for the packed layout offsets
// with action mask mask, the sampler's log-probabilities rollout and the
// trainer's train. Inputs are checked as MismatchMetrics checks them.
func RolloutCorrection(cfg *RolloutCorrectionConfig, offsets []int, mask []bool, rollout, train []float64) (*Correction, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkMismatchInputs(offsets, mask, rollout, train); err != nil {
		return nil, err
	}
	opts, _ := cfg.rsOptions()
	c := &Correction{Metrics: Metrics{}}
	if cfg.IS != "" {
		c.Weights = make([]float64, len(mask))
		isWeights(cfg, offsets, mask, rollout, train, c.Weights, c.Metrics)
	}
	if len(opts) > 0 {
		c.Keep = make([]bool, len(mask))
		rejectMask(opts, offsets, mask, rollout, train, c.Keep, c.Metrics)
	}
	return c, nil
}

// isWeights fills w with the truncated weights and m with verl's
// compute_is_metrics figures (taken before truncation).
func isWeights(cfg *RolloutCorrectionConfig, offsets []int, mask []bool, rollout, train, w []float64, m Metrics) {
	C := cfg.ISThreshold
	logHi, logLo := math.Log(C), math.Log(1/C)
	var n, sum float64
	wmax, wmin := math.Inf(-1), math.Inf(1)
	var high, low, seqs float64
	for i := 0; i+1 < len(offsets); i++ {
		s, e := offsets[i], offsets[i+1]
		var k int
		var lsum float64
		for t := s; t < e; t++ {
			if mask[t] {
				k++
				lsum += train[t] - rollout[t]
			}
		}
		if k == 0 {
			continue
		}
		seqLog := lsum
		if cfg.IS == "geometric" {
			seqLog = lsum / (float64(k) + maskEps) // verl's masked_mean
		}
		seqW := math.Exp(clampf(seqLog, -logRatioClamp, logRatioClamp))
		if cfg.IS != "token" { // verl's sequence-level figures are taken in log space
			seqs++
			wmax, wmin = math.Max(wmax, math.Exp(math.Min(seqLog, logRatioClamp))), math.Min(wmin, math.Exp(seqLog))
			if seqLog > logHi {
				high++
			}
			if seqLog < logLo {
				low++
			}
		}
		for t := s; t < e; t++ {
			if !mask[t] {
				continue
			}
			x := seqW
			if cfg.IS == "token" {
				x = math.Exp(clampf(train[t]-rollout[t], -logRatioClamp, logRatioClamp))
				wmax, wmin = math.Max(wmax, x), math.Min(wmin, x)
				if x > C {
					high++
				}
				if x < 1/C {
					low++
				}
			}
			w[t] = x
			n++
			sum += x
		}
	}
	if n == 0 {
		return
	}
	den := n
	if cfg.IS != "token" {
		den = seqs
	}
	p := "rollout_corr/rollout_is_"
	m[p+"mean"] = sum / (n + maskEps)
	m[p+"max"], m[p+"min"] = wmax, wmin
	m[p+"ratio_fraction_high"], m[p+"ratio_fraction_low"] = high/(den+maskEpsIf(cfg.IS == "token")), low/(den+maskEpsIf(cfg.IS == "token"))
	// std and ESS on the weights clamped to [1/C, C].
	var s1, s2 float64
	for t, on := range mask {
		if on {
			x := clampf(w[t], 1/C, C)
			s1 += x
			s2 += x * x
		}
	}
	mean := s1 / (n + maskEps)
	m[p+"std"] = 0
	if n > 1 {
		m[p+"std"] = math.Sqrt(math.Max(0, s2/(n+maskEps)-mean*mean))
	}
	m[p+"eff_sample_size"] = 1 / (s2 / ((mean + maskEps) * (mean + maskEps)) / (n + maskEps))
	// Truncation (TIS), then the optional batch normalisation.
	var tsum, sseq float64
	var nseq float64
	for i := 0; i+1 < len(offsets); i++ {
		var k, ssum float64
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if mask[t] {
				w[t] = math.Min(w[t], C)
				tsum += w[t]
				ssum += w[t]
				k++
			}
		}
		if k > 0 {
			sseq += ssum / (k + maskEps)
			nseq++
		}
	}
	if cfg.ISBatchNormalize {
		mu := tsum / (n + maskEps)
		if cfg.IS != "token" {
			mu = sseq / math.Max(nseq, maskEps)
		}
		f := 1.0
		if mu > maskEps {
			f = mu
			for t, on := range mask {
				if on {
					w[t] /= mu
				}
			}
		}
		m[p+"batch_norm_factor"] = f
	}
}

// maskEpsIf is verl's +1e-8 where its figure is a masked mean.
func maskEpsIf(on bool) float64 {
	if on {
		return maskEps
	}
	return 0
}

// rejectMask fills keep with mask less the tokens some option rejects and
// m with the rejected fractions and each option's statistic.
func rejectMask(opts []rsOption, offsets []int, mask []bool, rollout, train []float64, keep []bool, m Metrics) {
	copy(keep, mask)
	S := len(offsets) - 1
	var tokens, valid float64
	for i := 0; i < S; i++ {
		var k int
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if mask[t] {
				k++
			}
		}
		tokens += float64(k)
		if k > 0 {
			valid++
		}
	}
	if tokens == 0 {
		return
	}
	kval := func(k int, t int) float64 {
		r := clampf(train[t]-rollout[t], -logRatioClamp, logRatioClamp)
		switch k {
		case 1:
			return -r
		case 2:
			return r * r / 2
		}
		return math.Exp(r) - 1 - r
	}
	for _, o := range opts {
		pass := func(x float64) bool {
			if o.k == 1 {
				return x >= o.lo && x <= o.hi
			}
			return x <= o.hi
		}
		var rejTok, rejSeq, statSum float64
		smax, smin := math.Inf(-1), math.Inf(1)
		for i := 0; i < S; i++ {
			s, e := offsets[i], offsets[i+1]
			var k int
			var sum float64
			mx := math.Inf(-1)
			for t := s; t < e; t++ {
				if mask[t] {
					x := kval(o.k, t)
					k++
					sum += x
					mx = math.Max(mx, x)
				}
			}
			if k == 0 {
				continue
			}
			var seqStat float64
			switch o.level {
			case "seq_sum":
				seqStat = sum
			case "seq_mean":
				seqStat = sum / (float64(k) + maskEps)
			case "seq_max":
				seqStat = mx
			}
			var rej int
			for t := s; t < e; t++ {
				if !mask[t] {
					continue
				}
				x := seqStat
				if o.level == "token" {
					x = kval(o.k, t)
					smax, smin = math.Max(smax, x), math.Min(smin, x)
				}
				statSum += x
				if !pass(x) {
					rej++
					keep[t] = false
				}
			}
			if o.level != "token" {
				smax, smin = math.Max(smax, seqStat), math.Min(smin, seqStat)
			}
			rejTok += float64(rej)
			if rej > 0 {
				rejSeq++
			}
		}
		p := "rollout_corr/rollout_rs_" + o.name + "_"
		m[p+"mean"] = statSum / (tokens + maskEps)
		m[p+"max"], m[p+"min"] = smax, smin
		m[p+"masked_fraction"] = rejTok / (tokens + maskEps)
		m[p+"seq_masked_fraction"] = rejSeq / valid
	}
	var rejTok, rejSeq float64
	for i := 0; i < S; i++ {
		var rej bool
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if mask[t] && !keep[t] {
				rejTok++
				rej = true
			}
		}
		if rej {
			rejSeq++
		}
	}
	m["rollout_corr/rollout_rs_masked_fraction"] = rejTok / (tokens + maskEps)
	m["rollout_corr/rollout_rs_seq_masked_fraction"] = rejSeq / valid
}
