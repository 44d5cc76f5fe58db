package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/rl/metrics"
)

// offloadConfig is a two-step GRPO run of the warm-start fixture with a
// KL loss (so a reference policy is loaded), validated twice.
func offloadConfig(t *testing.T) Config {
	t.Helper()
	c := DefaultConfig()
	c.Model.Path = filepath.Join("testdata", "warmstart")
	c.SFT.Steps = 0
	c.Data.TrainBatchSize, c.Data.ValSize = 4, 4
	c.RL.Rollout.N, c.RL.Actor.MiniBatchSize = 4, 8
	c.RL.Actor.UseKLLoss, c.RL.Actor.KLLossCoef = true, 0.01
	c.Trainer.TotalSteps, c.Trainer.SaveFreq, c.Trainer.TestFreq = 2, 0, 0
	c.Trainer.Logger, c.RL.Rollout.Slots, c.Trainer.DefaultLocalDir = []string{"jsonl"}, 16, t.TempDir()
	return c
}

func runOffload(t *testing.T, c Config) (actor, optim []byte) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), &c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	step := filepath.Join(c.Trainer.DefaultLocalDir, "global_step_2")
	actor, err := os.ReadFile(filepath.Join(step, "actor", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if optim, err = os.ReadFile(filepath.Join(step, "actor_optim.safetensors")); err != nil {
		t.Fatal(err)
	}
	return actor, optim
}

// TestOffloadRunsSame: trainer.ref_offload and trainer.optim_offload move
// memory, not values: the same two steps write the same policy and AdamW
// state, byte for byte. rollout.dtype bfloat16 samples from a bf16 copy
// instead (other tokens, so other weights) and trains to finite metrics.
func TestOffloadRunsSame(t *testing.T) {
	plainActor, plainOptim := runOffload(t, offloadConfig(t))
	c := offloadConfig(t)
	c.Trainer.RefOffload, c.Trainer.OptimOffload, c.Trainer.OffloadDir = true, true, t.TempDir()
	actor, optim := runOffload(t, c)
	if !bytes.Equal(actor, plainActor) || !bytes.Equal(optim, plainOptim) {
		t.Errorf("offloaded run wrote other weights (%v) or optimizer state (%v)", !bytes.Equal(actor, plainActor), !bytes.Equal(optim, plainOptim))
	}

	c = offloadConfig(t)
	c.RL.Rollout.DType = "bfloat16"
	actor, _ = runOffload(t, c)
	if bytes.Equal(actor, plainActor) {
		t.Error("the bf16 rollout trained exactly the float32 rollout's weights: did it sample from the copy?")
	}
	records, err := metrics.ReadJSONL(filepath.Join(c.Trainer.DefaultLocalDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range records {
		for _, k := range []string{"actor/pg_loss", "actor/grad_norm", "actor/kl_loss"} {
			if v, ok := r.Data[k]; ok {
				n++
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s = %v with a bf16 rollout", k, v)
				}
			}
		}
	}
	if n < 6 {
		t.Errorf("found %d of the 6 actor metrics of two steps", n)
	}

	c = offloadConfig(t)
	c.RL.Rollout.DType = "float16"
	if err := c.Validate(); err == nil {
		t.Error("rollout.dtype float16 validated")
	}
}
