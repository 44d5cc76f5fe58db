package rl

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rollout correction: importance weights and rejection that correct the
// policy loss for the gap between the sampler μ (SampleLogProb) and the
// trainer's policy π (OldLogProb), verl's algorithm.rollout_correction
// (b178a3c, verl/trainer/ppo/rollout_corr_helper.py). With the log-ratio
// r_t = log π_t − log μ_t over the action tokens m_t of sequence i, n_i of
// them, and clamp(·) = clamp(·, ±20) (verl's SAFETY_BOUND):
//
// Importance weights (rollout_is), truncated at C = rollout_is_threshold (TIS):
//
//	token      w_t = min(e^{clamp(r_t)}, C)
//	sequence   w_t = min(e^{clamp(Σ_t r_t)}, C)           one weight for the whole sequence
//	geometric  w_t = min(e^{clamp(Σ_t r_t / n_i)}, C)     the geometric mean of the token ratios (verl before b178a3c)
//	rollout_is_batch_normalize: w ← w / mean(w) over the batch's action
//	tokens (token level) or over its sequences (sequence levels), when the
//	mean is above 1e-8.
//
// The weight multiplies the policy loss of each token: ℓ_t → w_t·ℓ_t, as
// verl's pg_losses * rollout_is_weights; it carries no gradient. The package
// applies it by scaling the advantage the policy loss reads, A_t → w_t·A_t,
// which is the same thing for every loss whose per-token loss is linear in
// its token's advantage (vanilla, gspo, decoupled and the usual policy
// gradients); entropy and KL terms do not read the advantage and stay
// unweighted, as in verl.
//
// Rejection (rollout_rs, a comma-separated list; a token stays only if every
// option keeps it), with k1_t = −clamp(r_t), k2_t = clamp(r_t)²/2,
// k3_t = e^{clamp(r_t)} − 1 − clamp(r_t):
//
//	token_k1          keep t when log(lo) ≤ k1_t ≤ log(hi)
//	seq_sum_k1        keep i when log(lo) ≤ Σ_t k1_t ≤ log(hi)          (sequence level)
//	seq_mean_k1       keep i when log(lo) ≤ Σ_t k1_t / n_i ≤ log(hi)    (geometric level)
//	token_k2, token_k3                      keep t when k_t ≤ hi
//	seq_{sum,mean}_k{2,3}, seq_max_k{2,3}   keep i when Σ, mean or max of k_t ≤ hi
//
// The thresholds (rollout_rs_threshold) are one entry per option or one for
// all, comma-separated; a k1 entry is "lo_hi" or "hi" (lo = 1/hi); note
// that k1 bounds μ/π, the inverse of the importance ratio. A rejected token
// leaves the loss: its action mask is cleared before the loss normaliser is
// counted, as verl rewrites response_mask. Every token of every sequence
// rejected in a mini-batch skips that mini-batch's update.
//
// Bypass mode (bypass_mode): π_old = μ, the old-log-probability forward pass
// is skipped. loss_type ppo_clip: the configured policy loss sees the
// ratio π_θ/μ, which already carries the correction, so no weight is
// applied (the weights are reported); loss_type reinforce:
// ℓ_t = −w_t·A_t·log π_θ,t with the weights and rejection above computed
// from the update's own log-probs π_θ against μ, micro-batch by micro-batch.
//
// Departures, where verl's code gives a meaningless figure: sequences with
// no action token are left out of the sequence statistics; a threshold
// below 1 for the weights and k1 bounds out of order are errors.

// RolloutCorrectionConfig is verl's algorithm.rollout_correction section.
type RolloutCorrectionConfig struct {
	IS               string  `yaml:"rollout_is" help:"importance weights from the sampler to the trainer: '' (off), token, sequence or geometric"`
	ISThreshold      float64 `yaml:"rollout_is_threshold" help:"truncation cap of the importance weights (TIS), ≥ 1"`
	ISBatchNormalize bool    `yaml:"rollout_is_batch_normalize" help:"divide the weights by their batch mean"`
	RS               string  `yaml:"rollout_rs" help:"rejection: comma-separated token_k1, seq_sum_k1, seq_mean_k1 (geometric), token_k2/k3, seq_sum_k2/k3, seq_mean_k2/k3, seq_max_k2/k3; '' off"`
	RSThreshold      string  `yaml:"rollout_rs_threshold" help:"rejection thresholds, one per option or one for all: lower_upper or upper for *_k1 (bounds of the sampler/trainer ratio), upper for k2/k3"`
	BypassMode       bool    `yaml:"bypass_mode" help:"use the sampler's log-probs as pi_old and skip the old-log-prob forward pass"`
	LossType         string  `yaml:"loss_type" help:"bypass mode's policy loss: ppo_clip (actor.policy_loss on the ratio to the sampler) or reinforce (importance-weighted REINFORCE)"`
}

// DefaultRolloutCorrectionConfig is verl's: off, cap 2 when turned on.
func DefaultRolloutCorrectionConfig() RolloutCorrectionConfig {
	return RolloutCorrectionConfig{ISThreshold: 2, LossType: "ppo_clip"}
}

// rsOption is one parsed rejection criterion.
type rsOption struct {
	name   string  // verl's option name
	level  string  // token, seq_sum, seq_mean or seq_max
	k      int     // 1, 2 or 3
	lo, hi float64 // k1: log bounds; k2/k3: hi only
}

// Validate reports an unknown level or option, a cap below 1, thresholds
// out of order or missing. The zero value is valid: everything off.
func (c *RolloutCorrectionConfig) Validate() error {
	switch c.IS {
	case "", "token", "sequence", "geometric":
	default:
		return fmt.Errorf("rollout_is %q is none of token, sequence, geometric (or empty: off)", c.IS)
	}
	if c.IS != "" && (!(c.ISThreshold >= 1) || math.IsInf(c.ISThreshold, 0)) {
		return fmt.Errorf("rollout_is_threshold %v must be a finite number ≥ 1 (the cap of the importance weights)", c.ISThreshold)
	}
	if _, err := c.rsOptions(); err != nil {
		return err
	}
	if c.LossType != "" && c.LossType != "ppo_clip" && c.LossType != "reinforce" {
		return fmt.Errorf("loss_type %q is neither ppo_clip nor reinforce", c.LossType)
	}
	if c.LossType == "reinforce" && !c.BypassMode {
		return errors.New("loss_type reinforce is bypass mode's loss: set bypass_mode true, or loss_type ppo_clip")
	}
	return nil
}

// active says whether weights or rejection change the loss.
func (c *RolloutCorrectionConfig) active() bool { return c.IS != "" || c.RS != "" }

// rsOptions parses rollout_rs and rollout_rs_threshold.
func (c *RolloutCorrectionConfig) rsOptions() ([]rsOption, error) {
	if strings.TrimSpace(c.RS) == "" {
		return nil, nil
	}
	var names []string
	seen := map[string]bool{}
	for _, o := range strings.Split(c.RS, ",") {
		o = strings.TrimSpace(o)
		if o == "" || seen[o] {
			continue
		}
		seen[o] = true
		names = append(names, o)
	}
	var specs []string
	for _, s := range strings.Split(c.RSThreshold, ",") {
		if s = strings.TrimSpace(s); s != "" {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("rollout_rs %q needs rollout_rs_threshold", c.RS)
	}
	if len(specs) != 1 && len(specs) != len(names) {
		return nil, fmt.Errorf("rollout_rs_threshold %q: give one threshold for all or one per option (%d)", c.RSThreshold, len(names))
	}
	out := make([]rsOption, len(names))
	for i, name := range names {
		spec := specs[0]
		if len(specs) > 1 {
			spec = specs[i]
		}
		o, err := parseRSOption(name, spec)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

func parseRSOption(name, spec string) (rsOption, error) {
	o := rsOption{name: name}
	cut := strings.LastIndex(name, "_k")
	if cut < 0 {
		return o, fmt.Errorf("rollout_rs option %q is unknown (token_k1, seq_sum_k1, seq_mean_k1, token_k2, ...)", name)
	}
	o.level = name[:cut]
	k, err := strconv.Atoi(name[cut+2:])
	valid := err == nil && k >= 1 && k <= 3 && (o.level == "token" || o.level == "seq_sum" || o.level == "seq_mean" || (o.level == "seq_max" && k > 1))
	if !valid {
		return o, fmt.Errorf("rollout_rs option %q is unknown: token_k1..3, seq_sum_k1..3, seq_mean_k1..3, seq_max_k2..3", name)
	}
	o.k = k
	num := func(s string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("rollout_rs_threshold %q for %s: %q is not a positive number", spec, name, s)
		}
		return v, nil
	}
	if k != 1 {
		if strings.Contains(spec, "_") {
			return o, fmt.Errorf("rollout_rs_threshold %q for %s: a k%d option takes one upper bound, no lower_upper pair", spec, name, k)
		}
		o.hi, err = num(spec)
		return o, err
	}
	loS, hiS, pair := strings.Cut(spec, "_")
	if !pair {
		hiS = loS
	}
	hi, err := num(hiS)
	if err != nil {
		return o, err
	}
	lo := 1 / hi
	if pair {
		if lo, err = num(loS); err != nil {
			return o, err
		}
	}
	if !(lo <= hi) {
		return o, fmt.Errorf("rollout_rs_threshold %q for %s: the lower bound %v is above the upper bound %v", spec, name, lo, hi)
	}
	o.lo, o.hi = math.Log(lo), math.Log(hi)
	return o, nil
}
