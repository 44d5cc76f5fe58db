package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/rl"
)

// Asynchronous training (trainer.async=true, rl/async.go): the rollout
// samples from a copy of the policy on a goroutine of its own, on the CPU
// device's threads or rollout.threads of its own, while the trainer
// updates; the copy is refreshed after every update.
//
// Where the concurrency comes from, and its limits:
//   - on the CPU, the rollout and the update share the cores: with
//     rollout.threads 0 both use every core and the operating system
//     shares them; rollout.threads N gives the rollout N threads of its
//     own. The gain is largest where the rollout waits (slow tools, the
//     longest trajectories of a batch) and the update computes.
//   - on a GPU the rollout runs on a second Device of the same GPU
//     (cuda.Device.Reopen: a stream and cuBLAS handle of its own in the
//     same context), from a copy of the weights in mixed precision (what
//     the synchronous rollout samples from), with a KV cache of its own;
//     the two streams' kernels share the GPU as the hardware schedules
//     them. The copy's refresh waits for both streams.
//   - in data parallel, the last dp.rollout_ranks ranks only roll out and
//     the others only train (rollranks.go); the weights travel over the
//     run's communicator after each update.

var errAsyncDP = errors.New("trainer.async under data parallel needs ranks that only roll out: set dp.rollout_ranks (for example 1)")

// validateAsync reports settings asynchronous training cannot run with.
func (c *Config) validateAsync() error {
	if !c.Trainer.Async {
		return nil
	}
	if err := c.RL.ValidateAsync(c.Trainer.AsyncConfig); err != nil {
		return err
	}
	if c.RL.Actor.LoRA.Enabled() {
		return errors.New("trainer.async with LoRA adapters: the rollout's copy would need the adapters merged; train without trainer.async")
	}
	return nil
}

// samplerSource hands out the training questions in the sampler's order,
// a step's batch at a time: to the synchronous step, or to the
// asynchronous rollout, which takes them ahead of the trainer.
type samplerSource struct {
	sampler *data.Sampler
	train   []data.Sample
}

func (s samplerSource) Next() []data.Sample {
	var out []data.Sample
	for _, i := range s.sampler.Next() {
		out = append(out, s.train[i])
	}
	return out
}

func (s samplerSource) State() data.SamplerState { return s.sampler.State() }

// startAsync starts tr's asynchronous rollout on a device of its own (CPU
// threads, or a second stream of the GPU, which closeDev closes after the
// rollout), with room for the K+1 batches the bound lets run at once; resume is the
// checkpoint resumed from (its sampler position is already restored).
// Data parallel without rollout ranks never gets here (validateRolloutRanks).
func startAsync(ctx context.Context, cfg *Config, s *agent.Setup, tr *rl.Trainer, sampler *data.Sampler, resume *trainerState) (a *rl.AsyncRollout, closeDev func(), err error) {
	closeDev = func() {}
	states, err := resumeStates(resume, 0)
	if err != nil {
		return nil, closeDev, err
	}
	var st *rl.AsyncState
	if states != nil {
		st = &states[0]
	}
	dev, closeDev, err := rolloutDevice(cfg, s)
	if err != nil {
		return nil, closeDev, err
	}
	rc := cfg.RL.Rollout
	slots := rc.SlotsFor(cfg.Data.TrainBatchSize * (rc.MaxStaleness + 1))
	a, err = tr.StartAsync(ctx, dev, slots, cfg.Model.MaxContext, cfg.Data.TrainBatchSize, samplerSource{sampler, s.Train}, st)
	return a, closeDev, err
}

// rolloutDevice is the device an asynchronous rollout runs on beside the
// policy's: rollout.threads CPU threads of its own (0: every core), or a
// second stream of the same GPU, which closeDev closes.
func rolloutDevice(cfg *Config, s *agent.Setup) (dev model.Device, closeDev func(), err error) {
	closeDev = func() {}
	switch d := s.Policy.Dev.(type) {
	case *cpu.Device[float32]:
		return cpu.NewThreads(cfg.RL.Rollout.Threads), closeDev, nil
	case *cuda.Device:
		g, err := d.Reopen() // a stream of its own on the same GPU
		if err != nil {
			return nil, closeDev, fmt.Errorf("trainer.async: a second stream for the rollout: %w", err)
		}
		return g, func() { g.Close() }, nil
	}
	return nil, closeDev, fmt.Errorf("trainer.async runs on the CPU and CUDA devices, not %s", s.Policy.Dev.Name())
}

// samplerState is the sampler's position for a checkpoint: an
// asynchronous rollout's, which takes its batches from the sampler on its
// own goroutine, or the sampler's own.
func samplerState(tr *rl.Trainer, sampler *data.Sampler) data.SamplerState {
	if _, _, pos, ok := asyncState(tr); ok {
		return pos
	}
	return sampler.State()
}
