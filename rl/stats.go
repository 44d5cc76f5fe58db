package rl

import (
	"fmt"
	"math"
	"sort"
)

// maskEps is verl's epsilon in masked means and whitening.
const maskEps = 1e-8

// whitenWith overwrites x with verl's masked_whiten over the tokens where m
// is true, given their sum and count from the estimator's own pass:
// (x − μ)·rsqrt(var + 1e-8), μ = sum/(n + 1e-8) (verl's masked_mean), var the
// unbiased masked variance (N/(N−1) Bessel factor). Positions where m is
// false must already be 0 and stay 0, so nothing unmasked leaks into a loss.
// It fails when fewer than two tokens are masked, as verl's masked_var does.
func whitenWith(x []float64, m []bool, sum float64, n int, what string) error {
	if n <= 1 {
		return fmt.Errorf("rl: whitening %s needs at least 2 masked tokens, the batch has %d", what, n)
	}
	mu := sum / (float64(n) + maskEps)
	var ss float64
	for t, v := range x {
		if m[t] {
			ss += (v - mu) * (v - mu)
		}
	}
	variance := ss / (float64(n) + maskEps) * float64(n) / float64(n-1)
	inv := 1 / math.Sqrt(variance+maskEps)
	for t, v := range x {
		if m[t] {
			x[t] = (v - mu) * inv
		}
	}
	return nil
}

// Metrics maps verl metric names ("actor/pg_loss", "critic/score/mean", ...)
// to values.
type Metrics map[string]float64

// Names returns the metric names in sorted order, for stable logging.
func (m Metrics) Names() []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// MeanMetrics averages metrics over micro-batches the way verl's
// reduce_metrics does: each name's plain mean over the maps that have it.
func MeanMetrics(ms []Metrics) Metrics {
	sum, cnt := Metrics{}, map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			sum[k] += v
			cnt[k]++
		}
	}
	for k := range sum {
		sum[k] /= float64(cnt[k])
	}
	return sum
}

// MaskedStats returns the mean, maximum and minimum of x over the positions
// where m is true, and their count; with no masked position all three are 0.
// These are the statistics behind verl's "<name>/mean", "/max", "/min".
func MaskedStats(x []float64, m []bool) (mean, max, min float64, n int) {
	max, min = math.Inf(-1), math.Inf(1)
	var s float64
	for t, v := range x {
		if m == nil || m[t] {
			s += v
			n++
			max = math.Max(max, v)
			min = math.Min(min, v)
		}
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	return s / float64(n), max, min, n
}

// PutStats stores verl's name/mean, name/max and name/min of x over the
// positions where mask is true (all positions when mask is nil), as
// MaskedStats computes them.
func (m Metrics) PutStats(name string, x []float64, mask []bool) { m.putStats(name, x, mask) }

// putStats is PutStats (kept for callers inside the package).
func (m Metrics) putStats(name string, x []float64, mask []bool) {
	mean, max, min, _ := MaskedStats(x, mask)
	m[name+"/mean"] = mean
	m[name+"/max"] = max
	m[name+"/min"] = min
}

// DataMetrics returns verl's per-step data metrics for a batch whose
// estimator has run: critic/score/*, critic/rewards/* (per-sequence sums of
// Scores and Rewards), critic/advantages/*, critic/returns/*, critic/values/*
// and critic/vf_explained_var over action tokens, response_length/*,
// prompt_length/* and action_length/* (model tokens per sequence). Fields that
// are nil are skipped.
func DataMetrics(b *Batch) (Metrics, error) {
	if err := b.Validate(FieldActionMask); err != nil {
		return nil, err
	}
	m := Metrics{}
	S := b.NumSeqs()
	perSeq := func(x []float64) []float64 {
		out := make([]float64, S)
		for i := range out {
			s, e := b.Seq(i)
			for t := s; t < e; t++ {
				out[i] += x[t]
			}
		}
		return out
	}
	if b.Scores != nil {
		if err := b.Validate(FieldScores); err != nil {
			return nil, err
		}
		m.putStats("critic/score", perSeq(b.Scores), nil)
	}
	if b.Rewards != nil {
		if err := b.Validate(FieldRewards); err != nil {
			return nil, err
		}
		m.putStats("critic/rewards", perSeq(b.Rewards), nil)
	}
	for _, f := range []struct {
		name string
		x    []float64
	}{{"critic/advantages", b.Advantages}, {"critic/returns", b.Returns}, {"critic/values", b.OldValues}} {
		if f.x != nil {
			if len(f.x) != b.NumTokens() {
				return nil, fmt.Errorf("rl: %s has %d entries, want %d", f.name, len(f.x), b.NumTokens())
			}
			m.putStats(f.name, f.x, b.ActionMask)
		}
	}
	if b.Returns != nil && b.OldValues != nil {
		m["critic/vf_explained_var"] = explainedVar(b.Returns, b.OldValues, b.ActionMask)
	}
	resp, act := make([]float64, S), make([]float64, S)
	for i := range resp {
		s, e := b.Seq(i)
		p := 0
		if b.PromptLen != nil {
			p = b.PromptLen[i]
		}
		resp[i] = float64(e - s - p)
		for t := s; t < e; t++ {
			if b.ActionMask[t] {
				act[i]++
			}
		}
	}
	if b.PromptLen != nil {
		pl := make([]float64, S)
		for i, p := range b.PromptLen {
			pl[i] = float64(p)
		}
		m.putStats("prompt_length", pl, nil)
		m.putStats("response_length", resp, nil)
	}
	m.putStats("action_length", act, nil)
	return m, nil
}

// explainedVar is verl's 1 − Var(R − V)/(Var(R) + 1e-5) with unbiased
// variances over the masked tokens.
func explainedVar(ret, val []float64, m []bool) float64 {
	diff := make([]float64, len(ret))
	for t := range ret {
		diff[t] = ret[t] - val[t]
	}
	return 1 - unbiasedVar(diff, m)/(unbiasedVar(ret, m)+1e-5)
}

func unbiasedVar(x []float64, m []bool) float64 {
	mean, _, _, n := MaskedStats(x, m)
	if n < 2 {
		return 0
	}
	var ss float64
	for t, v := range x {
		if m[t] {
			ss += (v - mean) * (v - mean)
		}
	}
	return ss / float64(n-1)
}
