package rl

import (
	"fmt"
	"math"
)

// Rollout mismatch: how far the sampler's log-probabilities (the rollout
// policy μ, recorded token by token while sampling) are from the trainer's
// log-probabilities of the same tokens under the same weights (π, the
// recomputed π_old). In an ideal system they are equal; bf16 weights, a
// different kernel or a different CPU tier make them drift, and that drift
// is off-policy data the PPO ratio does not see.
//
// The figures follow verl (b178a3c): verl/utils/debug/metrics.py for the
// probability differences and verl/trainer/ppo/rollout_corr_helper.py
// (compute_offpolicy_metrics) for the rest. With m the action mask,
// r_t = log π_t − log μ_t the log-ratio of the trainer to the sampler, and
// r̄_t = clamp(r_t, ±20) (verl's SAFETY_BOUND):
//
//	training/rollout_probs_diff_{mean,max,std}   of |e^{log π_t} − e^{log μ_t}| over masked tokens (std with Bessel's correction)
//	rollout_corr/kl        = mean_t (log μ_t − log π_t)             k1 estimate of KL(μ‖π), token mean
//	rollout_corr/k3_kl     = mean_t (e^{r̄_t} − r̄_t − 1)             k3 estimate, token mean
//	rollout_corr/chi2_token = mean_t e^{2 r̄_t} − 1
//	per sequence i with n_i masked tokens, ℓπ_i = Σ_t log π_t / n_i, ℓμ_i likewise:
//	rollout_corr/training_log_ppl = mean_i −ℓπ_i, training_ppl = mean_i e^{−ℓπ_i}
//	rollout_corr/rollout_log_ppl  = mean_i −ℓμ_i, rollout_ppl  = mean_i e^{−ℓμ_i}
//	rollout_corr/log_ppl_diff     = mean_i (ℓμ_i − ℓπ_i), and its mean |·|, max, min
//	rollout_corr/ppl_ratio        = mean_i e^{ℓμ_i − ℓπ_i}          (training PPL over rollout PPL)
//	rollout_corr/chi2_seq         = mean_i e^{2·clamp(Σ_t r_t, ±20)} − 1
//
// Additions of this package (verl has no such metric):
//
//	rollout_corr/kl_seq, k3_kl_seq = mean_i Σ_t k1_t, mean_i Σ_t k3_t   the sequence-level estimates (KL of whole responses)
//	rollout_corr/turn_{first,middle,last}/{kl,k3_kl,probs_diff_mean,probs_diff_max}
//	    the token figures over the first, the middle and the last model turn of
//	    the trajectories that have at least two turns (middle: at least three);
//	    a turn is a maximal run of action tokens.
//
// Token means divide by the count + 1e-8 as verl's masked_mean does (the
// per-trajectory TurnMismatch of the dump by the plain count).
//
// Departures from verl, each where verl's code would log a meaningless
// number: sequences without an action token are left out of the sequence
// means (verl's masked mean gives them log-PPL 0, PPL 1); k3 clamps r at
// ±20 as verl's chi² does (verl's k3 overflows to +Inf past about 709);
// one token gives a std of 0 (torch gives NaN). With no action token at all
// only training/rollout_probs_diff_valid = 0 is reported.

// Turn positions in the per-turn metrics.
const (
	turnFirst  = "first"
	turnMiddle = "middle"
	turnLast   = "last"
)

// TurnMismatch is the mismatch over one model turn of a trajectory (a
// maximal run of action tokens), as the rollout dump records it.
type TurnMismatch struct {
	Tokens       int     `json:"tokens"`
	KL           float64 `json:"kl"`    // mean of log μ − log π (k1)
	K3           float64 `json:"k3_kl"` // mean of e^r̄ − r̄ − 1
	ProbDiffMean float64 `json:"probs_diff_mean"`
	ProbDiffMax  float64 `json:"probs_diff_max"`
}

// tokenAcc accumulates the token figures of a set of tokens.
type tokenAcc struct {
	n                  int
	k1, k3, chi2, diff float64
	max                float64
}

func (a *tokenAcc) add(train, roll float64) {
	r := train - roll
	rc := clampf(r, -logRatioClamp, logRatioClamp)
	d := math.Abs(math.Exp(train) - math.Exp(roll))
	a.n++
	a.k1 -= r
	a.k3 += math.Exp(rc) - rc - 1
	a.chi2 += math.Exp(2 * rc)
	a.diff += d
	if a.n == 1 || d > a.max {
		a.max = d
	}
}

func (a *tokenAcc) turn() TurnMismatch {
	n := float64(a.n)
	return TurnMismatch{Tokens: a.n, KL: a.k1 / n, K3: a.k3 / n, ProbDiffMean: a.diff / n, ProbDiffMax: a.max}
}

// checkMismatchInputs reports inputs of different lengths and a NaN or Inf
// on an action token, naming the field, sequence and token.
func checkMismatchInputs(offsets []int, mask []bool, rollout, train []float64) error {
	if len(offsets) == 0 {
		return fmt.Errorf("rl: rollout mismatch: no offsets")
	}
	n := offsets[len(offsets)-1]
	if len(mask) != n || len(rollout) != n || len(train) != n {
		return fmt.Errorf("rl: rollout mismatch: %d tokens, mask %d, sampling log-probs %d, trainer log-probs %d",
			n, len(mask), len(rollout), len(train))
	}
	for i := 0; i+1 < len(offsets); i++ {
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if !mask[t] {
				continue
			}
			for _, f := range []struct {
				name string
				v    float64
			}{{string(FieldSampleLogProb), rollout[t]}, {string(FieldOldLogProb), train[t]}} {
				if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
					return fmt.Errorf("rl: %s[%d] (sequence %d, token %d) is %v", f.name, t, i, t-offsets[i], f.v)
				}
			}
		}
	}
	return nil
}

// TurnMismatches returns, for each sequence of the packed layout offsets,
// the mismatch of each of its model turns (maximal runs of tokens where
// mask is true), in order; a sequence without action tokens gets none.
// rollout holds the sampler's log-probabilities, train the trainer's.
func TurnMismatches(offsets []int, mask []bool, rollout, train []float64) ([][]TurnMismatch, error) {
	if err := checkMismatchInputs(offsets, mask, rollout, train); err != nil {
		return nil, err
	}
	out := make([][]TurnMismatch, len(offsets)-1)
	for i := range out {
		var acc tokenAcc
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if mask[t] {
				acc.add(train[t], rollout[t])
			}
			if acc.n > 0 && (t+1 == offsets[i+1] || !mask[t+1]) {
				out[i] = append(out[i], acc.turn())
				acc = tokenAcc{}
			}
		}
	}
	return out, nil
}

// MismatchMetrics returns the rollout-mismatch metrics (see the top of
// this file for each formula) of a packed batch: sequence i is tokens
// [offsets[i], offsets[i+1]), mask is true on its action tokens, rollout
// holds the sampler's log-probabilities (Batch.SampleLogProb) and train the
// trainer's of the same tokens (Batch.OldLogProb). A NaN or Inf on an action
// token is an error naming it.
func MismatchMetrics(offsets []int, mask []bool, rollout, train []float64) (Metrics, error) {
	if err := checkMismatchInputs(offsets, mask, rollout, train); err != nil {
		return nil, err
	}
	var all tokenAcc
	turns := map[string]*tokenAcc{turnFirst: {}, turnMiddle: {}, turnLast: {}}
	var seqs, klSeq, k3Seq, trainLog, trainPPL, rollLog, rollPPL, diffSum, diffAbs, ratio, chi2Seq float64
	diffMax, diffMin := math.Inf(-1), math.Inf(1)
	var turnAccs []tokenAcc
	for i := 0; i+1 < len(offsets); i++ {
		var seq tokenAcc
		var sumTrain, sumRoll, sumR float64
		turnAccs = turnAccs[:0]
		for t := offsets[i]; t < offsets[i+1]; t++ {
			if !mask[t] {
				continue
			}
			all.add(train[t], rollout[t])
			seq.add(train[t], rollout[t])
			sumTrain += train[t]
			sumRoll += rollout[t]
			sumR += train[t] - rollout[t]
			if t == offsets[i] || !mask[t-1] {
				turnAccs = append(turnAccs, tokenAcc{})
			}
			turnAccs[len(turnAccs)-1].add(train[t], rollout[t])
		}
		if seq.n == 0 {
			continue
		}
		n := float64(seq.n)
		seqs++
		klSeq += seq.k1
		k3Seq += seq.k3
		lt, lr := sumTrain/(n+maskEps), sumRoll/(n+maskEps) // verl's masked_mean
		trainLog -= lt
		trainPPL += math.Exp(-lt)
		rollLog -= lr
		rollPPL += math.Exp(-lr)
		d := lr - lt
		diffSum += d
		diffAbs += math.Abs(d)
		diffMax, diffMin = math.Max(diffMax, d), math.Min(diffMin, d)
		ratio += math.Exp(d)
		chi2Seq += math.Exp(2 * clampf(sumR, -logRatioClamp, logRatioClamp))
		if k := len(turnAccs); k >= 2 {
			turns[turnFirst].merge(&turnAccs[0])
			turns[turnLast].merge(&turnAccs[k-1])
			for j := 1; j < k-1; j++ {
				turns[turnMiddle].merge(&turnAccs[j])
			}
		}
	}
	if all.n == 0 {
		return Metrics{"training/rollout_probs_diff_valid": 0}, nil
	}
	n := float64(all.n)
	mean := all.diff / n
	std := 0.0
	if all.n > 1 { // a second pass: the textbook one-pass formula cancels when the differences are alike
		var ss float64
		for t, on := range mask {
			if on {
				d := math.Abs(math.Exp(train[t])-math.Exp(rollout[t])) - mean
				ss += d * d
			}
		}
		std = math.Sqrt(ss / (n - 1))
	}
	m := Metrics{
		"training/rollout_probs_diff_valid": 1,
		"training/rollout_probs_diff_mean":  mean,
		"training/rollout_probs_diff_max":   all.max,
		"training/rollout_probs_diff_std":   std,
		"rollout_corr/kl":                   all.k1 / (n + maskEps),
		"rollout_corr/k3_kl":                all.k3 / (n + maskEps),
		"rollout_corr/chi2_token":           all.chi2/(n+maskEps) - 1,
		"rollout_corr/kl_seq":               klSeq / seqs,
		"rollout_corr/k3_kl_seq":            k3Seq / seqs,
		"rollout_corr/training_log_ppl":     trainLog / seqs,
		"rollout_corr/training_ppl":         trainPPL / seqs,
		"rollout_corr/rollout_log_ppl":      rollLog / seqs,
		"rollout_corr/rollout_ppl":          rollPPL / seqs,
		"rollout_corr/log_ppl_diff":         diffSum / seqs,
		"rollout_corr/log_ppl_abs_diff":     diffAbs / seqs,
		"rollout_corr/log_ppl_diff_max":     diffMax,
		"rollout_corr/log_ppl_diff_min":     diffMin,
		"rollout_corr/ppl_ratio":            ratio / seqs,
		"rollout_corr/chi2_seq":             chi2Seq/seqs - 1,
	}
	for _, pos := range []string{turnFirst, turnMiddle, turnLast} {
		a := turns[pos]
		if a.n == 0 {
			continue
		}
		p := "rollout_corr/turn_" + pos + "/"
		c := float64(a.n) + maskEps
		m[p+"kl"], m[p+"k3_kl"], m[p+"probs_diff_mean"], m[p+"probs_diff_max"] = a.k1/c, a.k3/c, a.diff/c, a.max
	}
	return m, nil
}

// merge adds b's tokens to a.
func (a *tokenAcc) merge(b *tokenAcc) {
	if b.n == 0 {
		return
	}
	if a.n == 0 || b.max > a.max {
		a.max = b.max
	}
	a.n += b.n
	a.k1 += b.k1
	a.k3 += b.k3
	a.chi2 += b.chi2
	a.diff += b.diff
}

// BatchMismatch is MismatchMetrics of b's sampling log-probabilities
// against its recomputed ones (SampleLogProb, OldLogProb, ActionMask).
func BatchMismatch(b *Batch) (Metrics, error) {
	if err := b.require(FieldActionMask, FieldSampleLogProb, FieldOldLogProb); err != nil {
		return nil, err
	}
	return MismatchMetrics(b.Offsets, b.ActionMask, b.SampleLogProb, b.OldLogProb)
}
