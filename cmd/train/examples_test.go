package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/config"
)

// Every combination of the examples/agent-r1 files loads and validates,
// carries the paper's hyperparameters, and leaves no tiny-only setting at
// its tiny default (so no warning fires on a real model).
func TestExampleConfigs(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "agent-r1")
	for _, algo := range []string{"grpo", "ppo", "reinforce_pp"} {
		for _, size := range []string{"1.5b", "3b", "7b"} {
			c := DefaultConfig()
			args := []string{"-config", filepath.Join(dir, "hotpotqa-wiki18.yaml"), "-config", filepath.Join(dir, algo+".yaml"),
				"-config", filepath.Join(dir, "qwen2.5-"+size+"-instruct.yaml")}
			if err := config.Load(&c, args, nil); err != nil {
				t.Fatalf("%s %s: %v", algo, size, err)
			}
			if left := tinyDefaults(&c); len(left) > 0 {
				t.Errorf("%s %s leaves tiny defaults: %v", algo, size, left)
			}
			if !strings.Contains(c.Model.Path, "Qwen2.5-"+strings.ToUpper(size)+"-Instruct") {
				t.Errorf("%s: model.path %q", size, c.Model.Path)
			}
			if c.RL.Actor.Optim.LR != 1e-6 || c.Data.TrainBatchSize != 128 || c.RL.Actor.MiniBatchSize != 64 || c.Env.MaxTurns != 5 ||
				c.Env.MaxResponseChars != 2048 || c.RL.Rollout.MaxTurnTokens != 1024 || c.SFT.Steps != 0 {
				t.Errorf("%s %s: not the paper's shared settings: %+v", algo, size, c.RL.Actor)
			}
			switch algo {
			case "grpo":
				if c.RL.Algorithm.Estimator != "grpo" || c.RL.Rollout.N != 5 || !c.RL.Actor.UseKLLoss || c.RL.Actor.KLLossCoef != 0.001 {
					t.Errorf("grpo: %+v", c.RL)
				}
			case "ppo":
				if c.RL.Algorithm.Estimator != "gae" || !c.RL.Algorithm.UseKLInReward || c.RL.Critic.Optim.LR != 1e-5 || c.RL.Critic.Warmup != 5 {
					t.Errorf("ppo: %+v", c.RL)
				}
			case "reinforce_pp":
				if c.RL.Algorithm.Estimator != "reinforce_plus_plus" || !c.RL.Algorithm.UseKLInReward || c.RL.Algorithm.KLCoef != 0.001 {
					t.Errorf("reinforce++: %+v", c.RL)
				}
			}
		}
	}
	// The embedded default on a real model warns about each tiny setting.
	c := DefaultConfig()
	c.Model.Path = "models/Qwen2.5-3B-Instruct"
	c.Data.TrainFiles = []string{"train.parquet"}
	got := strings.Join(tinyDefaults(&c), "\n")
	for _, k := range []string{"actor.optim.lr=0.0002", "env.topk=1", "rollout.max_turn_tokens=64", "model.max_context=1280", "sft.steps=800"} {
		if !strings.Contains(got, k) {
			t.Errorf("tiny defaults lack %s:\n%s", k, got)
		}
	}
}

// The Search-R1 example loads, speaks Search-R1's protocol and carries its
// GRPO script's settings, with no tiny-only default left in place.
func TestSearchR1ExampleConfig(t *testing.T) {
	c := DefaultConfig()
	if err := config.Load(&c, []string{"-config", filepath.Join("..", "..", "examples", "search-r1", "nq-hotpotqa-grpo.yaml")}, nil); err != nil {
		t.Fatal(err)
	}
	if left := tinyDefaults(&c); len(left) > 0 {
		t.Errorf("leaves tiny defaults: %v", left)
	}
	if c.Env.Style != "search-r1" || c.Env.Reward != "em" || c.Env.TopK != 3 || c.Env.MaxTurns != 2 || c.Model.MaxContext != 4096 ||
		c.RL.Rollout.MaxTurnTokens != 500 || c.RL.Rollout.MaxPromptTokens != 2048 || c.RL.Rollout.N != 5 {
		t.Errorf("not Search-R1's protocol and lengths: env %+v, rollout %+v", c.Env, c.RL.Rollout)
	}
	if c.Data.TrainBatchSize != 512 || c.RL.Actor.MiniBatchSize != 256 || c.RL.Actor.Optim.LR != 1e-6 || !c.RL.Actor.UseKLLoss ||
		c.RL.Actor.KLLossCoef != 0.001 || c.RL.Algorithm.Estimator != "grpo" || c.Trainer.TotalSteps != 1005 {
		t.Errorf("not Search-R1's GRPO settings: %+v", c.RL.Actor)
	}
	// Warm-up: 0.285 of the RL steps, in optimizer steps (10 mini-batches a step).
	perStep := c.Data.TrainBatchSize * c.RL.Rollout.N / c.RL.Actor.MiniBatchSize
	if got, want := c.RL.Actor.Optim.WarmupSteps, int(0.285*float64(c.Trainer.TotalSteps))*perStep; got != want {
		t.Errorf("warmup_steps %d, want %d", got, want)
	}
}
