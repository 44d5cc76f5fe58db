package main

import (
	"reflect"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// TestDefaultProfile checks that default.yaml applies (DefaultConfig panics
// otherwise) and gives the embedded run's values, where they depart from
// the library defaults, and keeps the library's where it says nothing.
func TestDefaultProfile(t *testing.T) {
	c := DefaultConfig()
	lib := rl.DefaultTrainerConfig()
	if lib.Rollout.N != 5 || c.RL.Rollout.N != 8 {
		t.Errorf("rollout.n: library %d (want Agent-R1's 5), embedded run %d (want 8)", lib.Rollout.N, c.RL.Rollout.N)
	}
	r := c.RL.Rollout
	if r.MaxTurnTokens != 64 || r.MaxResponseTokens != 640 || r.MaxPromptTokens != 512 || r.ToolConcurrency != 8 || !r.Deterministic {
		t.Errorf("rollout %+v", r)
	}
	if r.Sampling != (model.Sampling{Temperature: 1, TopP: 1, TopK: -1}) {
		t.Errorf("rollout.sampling %+v", r.Sampling)
	}
	a := c.RL.Actor
	if a.Optim.LR != 2e-4 || a.Optim.WarmupSteps != 0 || a.Optim.WeightDecay != 0 || a.Optim.Beta2 != 0.99 || a.UseKLLoss ||
		a.MiniBatchSize != 64 || a.MicroBatchTokens != 16384 {
		t.Errorf("actor %+v", a)
	}
	if o := c.SFT.Optim; o.LR != 3e-3 || o.WarmupSteps != 10 || o.WeightDecay != 0 || o.Beta2 != 0.99 {
		t.Errorf("sft.optim %+v", o)
	}
	if c.Env.Reward != "em" {
		t.Errorf("env.reward %q", c.Env.Reward)
	}
	// Everything the profile does not name is the library's.
	if !reflect.DeepEqual(c.RL.Algorithm, lib.Algorithm) || !reflect.DeepEqual(c.RL.Critic, lib.Critic) {
		t.Errorf("algorithm or critic departs from the library: %+v %+v", c.RL.Algorithm, c.RL.Critic)
	}
	a.LossConfig.UseKLLoss = true
	if a.LossConfig != lib.Actor.LossConfig {
		t.Errorf("actor loss settings other than use_kl_loss depart from the library: %+v", a.LossConfig)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
