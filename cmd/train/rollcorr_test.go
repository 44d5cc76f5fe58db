package main

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/rl"
)

// The rollout mismatch is measured every step and the corrections run from
// the config: these runs are one or two steps of the default from the
// committed warm start (dpConfig).

// rollcorrRun runs c on one process and returns its metric records.
func rollcorrRun(t *testing.T, c Config) []map[string]float64 {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var ds []map[string]float64
	for _, r := range records(t, c.Trainer.DefaultLocalDir) {
		ds = append(ds, r.Data)
	}
	return ds
}

func TestRolloutMismatchByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer")
	}
	dir := t.TempDir()
	c := dpConfig(t, dir)
	c.Trainer.TotalSteps = 1
	m := rollcorrRun(t, c)[0]
	for _, k := range []string{"training/rollout_probs_diff_mean", "training/rollout_probs_diff_max", "training/rollout_probs_diff_std",
		"rollout_corr/kl", "rollout_corr/k3_kl", "rollout_corr/training_ppl", "rollout_corr/rollout_ppl", "rollout_corr/ppl_ratio",
		"rollout_corr/kl_seq", "rollout_corr/turn_first/kl", "rollout_corr/turn_last/kl"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s is not logged by default", k)
		}
	}
	// The CPU rollout and the trainer compute in float32 on the same weights:
	// they agree to float32 rounding, far below any correction's threshold.
	if d := m["training/rollout_probs_diff_max"]; !(d < 1e-3) {
		t.Errorf("the CPU sampler and trainer differ by %v in probability", d)
	}
	if _, ok := m["timing_s/old_log_prob"]; ok {
		t.Error("the default recomputed pi_old: measuring must not cost a forward pass")
	}
	recs, err := rl.ReadDump(filepath.Join(dir, "rollouts", "step_1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	with := 0
	for _, r := range recs {
		if len(r.Mismatch) > 0 {
			with++
			if len(r.Mismatch) != r.Turns && r.Finish != "length" {
				t.Errorf("trajectory %d: %d turns, %d turn mismatches", r.Index, r.Turns, len(r.Mismatch))
			}
		}
	}
	if with == 0 {
		t.Error("no dumped trajectory carries its per-turn mismatch")
	}
}

func TestRolloutCorrectionModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer three times")
	}
	base := func() Config {
		c := dpConfig(t, t.TempDir())
		c.Trainer.TotalSteps = 1
		return c
	}
	tis := base()
	tis.RL.Algorithm.RolloutCorrection.IS = "token"
	tis.RL.Algorithm.RolloutCorrection.RS = "token_k1,seq_mean_k1"
	tis.RL.Algorithm.RolloutCorrection.RSThreshold = "0.5_2,0.9_1.1"
	m := rollcorrRun(t, tis)[0]
	for _, k := range []string{"rollout_corr/rollout_is_mean", "rollout_corr/rollout_rs_masked_fraction", "timing_s/old_log_prob", "rollout_corr/kl"} {
		if _, ok := m[k]; !ok {
			t.Errorf("TIS and rejection: %s missing", k)
		}
	}
	by := base()
	by.RL.Algorithm.RolloutCorrection.BypassMode = true
	by.RL.Algorithm.RolloutCorrection.RS = "token_k1"
	by.RL.Algorithm.RolloutCorrection.RSThreshold = "2"
	m = rollcorrRun(t, by)[0]
	if _, ok := m["timing_s/old_log_prob"]; ok {
		t.Error("bypass mode ran the old-log-prob forward pass")
	}
	for _, k := range []string{"rollout_corr/rollout_rs_masked_fraction", "rollout_corr/kl", "actor/pg_loss"} {
		if _, ok := m[k]; !ok {
			t.Errorf("bypass: %s missing", k)
		}
	}
	rf := base()
	rf.RL.Algorithm.RolloutCorrection.BypassMode = true
	rf.RL.Algorithm.RolloutCorrection.LossType = "reinforce"
	rf.RL.Algorithm.RolloutCorrection.IS = "sequence"
	rf.RL.Actor.PolicyLoss = "decoupled" // replaced by bypass mode's reinforce loss
	m = rollcorrRun(t, rf)[0]
	if _, ok := m["rollout_corr/rollout_is_eff_sample_size"]; !ok {
		t.Error("bypass reinforce: the weights' metrics are missing")
	}
	dec := base()
	dec.RL.Actor.PolicyLoss, dec.RL.Actor.BehavImpWeightCap = "decoupled", 2
	m = rollcorrRun(t, dec)[0]
	if v, ok := m["actor/behave_mask"]; !ok || !(v > 0.99) {
		t.Errorf("decoupled loss on CPU rollouts: behave_mask %v (%v), want all tokens under the cap", v, ok)
	}
}

func TestRolloutCorrectionConfigErrorsFromFlags(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_is_threshold=0.5", "must be a finite number ≥ 1"},
		{"algorithm.rollout_correction.rollout_rs=token_k1 algorithm.rollout_correction.rollout_rs_threshold=2_0.5", "above the upper bound"},
		{"actor.behav_imp_weight_cap=0.5", "behav_imp_weight_cap 0.5"},
		{"actor.policy_loss=decoupled algorithm.rollout_correction.rollout_is=token", "already weights by the sampler's ratio"},
		{"actor.policy_loss=decoupled algorithm.rollout_correction.bypass_mode=true", "needs the recomputed pi_old"},
	} {
		cfg := DefaultConfig()
		err := config.Load(&cfg, strings.Fields(c.args), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.args, err, c.want)
		}
	}
}

// closeExtreme is close, looser for the extremes of sequence-level
// figures: each rank computes the log-probs of its own micro-batches, which
// round in float32 unlike one process's, and e^{Σ_t r_t} over a few hundred
// tokens of the most extreme sequence moves by about 1e-4 with it.
func closeExtreme(k string, a, b float64) bool {
	if strings.HasSuffix(k, "_min") || strings.HasSuffix(k, "_max") {
		return math.Abs(a-b) <= 2e-3*max(1, math.Abs(a), math.Abs(b))
	}
	return close(a, b)
}

// TestRolloutCorrectionDataParallel: two ranks measure and correct over
// the global batch as one process does: by default (the update's own
// log-probs are recorded and gathered), with π_old recomputed and weights
// and rejection applied (bf16 rollouts, so that something is rejected),
// and in bypass mode. Bypass mode corrects micro-batch by micro-batch, so
// its weight and rejection figures are means over micro-batches that the
// ranks cut differently; only the mismatch and the loss are compared there.
func TestRolloutCorrectionDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trainer six times")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed")
	}
	for _, mode := range []string{"default", "tis", "bypass"} {
		cfg := func() Config {
			c := dpConfig(t, t.TempDir())
			c.Trainer.TotalSteps = 2
			rc := &c.RL.Algorithm.RolloutCorrection
			switch mode {
			case "tis":
				c.RL.Rollout.DType = "bfloat16"
				rc.IS, rc.ISBatchNormalize, rc.RS, rc.RSThreshold = "sequence", true, "token_k1", "0.99_1.01"
			case "bypass":
				c.RL.Rollout.DType = "bfloat16"
				rc.BypassMode, rc.IS, rc.RS, rc.RSThreshold = true, "token", "token_k1", "0.99_1.01"
			}
			return c
		}
		one, two := cfg(), cfg()
		ra := rollcorrRun(t, one)
		if o, err := mpiRun(t, 2, two, nil); err != nil {
			t.Fatalf("%s: mpirun: %v\n%s", mode, err, o)
		}
		rb := records(t, two.Trainer.DefaultLocalDir)
		for i := range ra {
			n := 0
			for k, a := range ra[i] {
				if !strings.HasPrefix(k, "rollout_corr/") && !strings.HasPrefix(k, "training/rollout_probs") && k != "actor/pg_loss" {
					continue
				}
				if mode == "bypass" && (strings.HasPrefix(k, "rollout_corr/rollout_is") || strings.HasPrefix(k, "rollout_corr/rollout_rs")) {
					continue
				}
				n++
				if b, ok := rb[i].Data[k]; !ok || !closeExtreme(k, a, b) {
					t.Errorf("%s step %d %s: %v on one process, %v on two ranks", mode, i+1, k, a, b)
				}
			}
			if n < 10 {
				t.Errorf("%s step %d: only %d rollout-correction metrics", mode, i+1, n)
			}
			if mode != "default" {
				if f := ra[i]["rollout_corr/rollout_rs_masked_fraction"]; !(f > 0 && f < 1) {
					t.Errorf("%s step %d: rejected fraction %v: the test should reject some tokens, not all", mode, i+1, f)
				}
			}
		}
	}
}
