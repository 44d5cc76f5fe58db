package rl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// Trainer runs RL steps: the policy samples trajectories with the rollout,
// and the same weights are updated in place, so the next rollout samples
// from the updated policy with no copy.
type Trainer struct {
	Cfg       TrainerConfig
	Policy    *model.Model
	Ref       *model.Model // frozen reference policy; nil when no KL is used
	Critic    *model.Model // value model; only for gae
	Rollout   *Rollout
	Source    TrajectorySource // when set, trajectories come from here instead of Rollout (rollout.mode=external)
	ActorOpt  *optim.AdamW
	CriticOpt *optim.AdamW
	KLCtrl    KLController

	ToolCallEnd int32 // token that ends a tool call (process rewards)
	// Sync is the data-parallel part (Local in a run of one process); the
	// trainer always goes through it.
	Sync Sync
	// Phase, when set, is told each phase of a step as it ends (the names
	// of the timing_s metrics: gen, gen_baseline, old_log_prob, ref, values,
	// adv, update_critic, update_actor, and refresh in asynchronous
	// training), so that a caller can show progress inside a step that
	// takes minutes.
	Phase func(name string, took time.Duration)
	// Verifier checks each step's trajectories and batch (verify.go,
	// rollout.verify); nil checks without the chat template.
	Verifier *Verifier
	step     int   // RL steps done
	slice    Slice // this process's share of the step's batch (Sync.Shard)
	// rolloutCopy is the bf16 copy the rollout samples from
	// (rollout.dtype bfloat16), or nil.
	rolloutCopy *model.Model
	rc          *rollcorrStep // this step's rollout correction (rollcorr_trainer.go)
	// Async, in asynchronous training, is the rollout the steps take their
	// trajectories from (StartAsync; async.go); Step is then given no
	// prompts.
	Async AsyncSource
}

// Steps is the number of RL steps done.
func (t *Trainer) Steps() int { return t.step }

// SetSteps restores the step count on resume.
func (t *Trainer) SetSteps(n int) { t.step = n }

// StepResult is one RL step's trajectories and metrics.
type StepResult struct {
	Trajectories []*Trajectory
	Metrics      Metrics
	Tokens       int    // prompt + response tokens of the step
	Batch        *Batch // the packed step, advantages included (for the rollout dump)
}

// Step runs one RL step on a batch of prompts (none in asynchronous
// training: the rollout's source supplies them), in the order verl's
// trainer runs it: the rollout, the rewards, the old and reference
// log-probabilities and the values, the advantages, then the critic and
// actor updates. Each phase is a method below, timed as timing_s/<phase>.
func (t *Trainer) Step(ctx context.Context, prompts []data.Sample) (*StepResult, error) {
	m := Metrics{}
	clock := stepClock{t: t, m: m}
	t0 := time.Now()
	trajs, baseline, err := t.rollout(ctx, prompts, clock)
	if err != nil {
		return nil, err
	}
	if trajs, baseline, err = t.verifyRecords(trajs, baseline, m); err != nil {
		return nil, err
	}
	b, err := t.score(trajs, baseline, m)
	if err != nil {
		return nil, err
	}
	if t.Cfg.Rollout.TruncationLoss == TruncationMask { // masked after the estimator, on the global batch
		if err := markTruncated(b, trajs); err != nil {
			return nil, err
		}
	}
	if err := t.verifyBatch(b, trajs); err != nil {
		return nil, err
	}
	if err := t.logProbs(b, clock); err != nil {
		return nil, err
	}
	if b, err = t.advantages(b, clock); err != nil {
		return nil, err
	}
	if err := t.maskTruncation(b, m); err != nil {
		return nil, err
	}
	if err := t.updateModels(b, clock); err != nil {
		return nil, err
	}
	if err := t.rollcorrEnd(trajs, m); err != nil { // the per-turn mismatch (rollcorr_trainer.go)
		return nil, err
	}
	t.step++
	if t.Async != nil { // the rollout goes on under the new weights
		tr := time.Now()
		if err := t.Async.Refresh(t.Policy, t.step); err != nil {
			return nil, err
		}
		clock.since("refresh", tr)
	}
	rm, err := t.sync().RolloutMetrics(trajs) // over every process's trajectories
	if err != nil {
		return nil, err
	}
	for k, v := range rm {
		m[k] = v
	}
	clock.since("step", t0)
	m["perf/total_num_tokens"] = float64(b.NumTokens())
	m["perf/throughput"] = float64(b.NumTokens()) / m["timing_s/step"]
	m["training/global_step"] = float64(t.step)
	return &StepResult{Trajectories: trajs, Metrics: m, Tokens: b.NumTokens(), Batch: b}, nil
}

// stepClock records how long each phase of a step took, as the step's
// timing_s/<phase> metric, and tells Trainer.Phase.
type stepClock struct {
	t *Trainer
	m Metrics
}

func (c stepClock) since(name string, start time.Time) {
	took := time.Since(start)
	c.m["timing_s/"+name] = took.Seconds()
	if c.t.Phase != nil && name != "step" {
		c.t.Phase(name, took)
	}
}

// rollout samples this process's share of the prompts (Sync.Shard) from
// the policy, or takes them from Source, and, for an estimator that needs
// one, each prompt's greedy baseline.
func (t *Trainer) rollout(ctx context.Context, prompts []data.Sample, clock stepClock) ([]*Trajectory, []float64, error) {
	cfg := &t.Cfg
	if t.Async != nil {
		if len(prompts) > 0 {
			return nil, nil, errors.New("rl: an asynchronous trainer's steps take their prompts from its rollout's source, not from Step")
		}
		tg := time.Now()
		trajs, am, err := t.Async.Take(ctx, t.step)
		if err != nil {
			return nil, nil, err
		}
		clock.since("gen", tg) // the wait for the batch
		for k, v := range am {
			clock.m[k] = v
		}
		// Data parallel: every trainer rank is given the whole batch and
		// keeps its share of the groups, numbered as its own rollout's
		// would be.
		t.slice = t.sync().Shard(make([]data.Sample, len(trajs)/cfg.Rollout.N), cfg.Rollout.N)
		trajs = trajs[t.slice.SeqLo:t.slice.SeqHi]
		for _, tr := range trajs {
			tr.Group -= t.slice.PromptLo
		}
		return trajs, nil, nil
	}
	// This process rolls out its share of the global prompt batch; its
	// first trajectory draws from the stream the whole batch's would.
	t.slice = t.sync().Shard(prompts, cfg.Rollout.N)
	prompts = prompts[t.slice.PromptLo:t.slice.PromptHi]
	if t.Rollout != nil {
		t.Rollout.StreamBase = uint64(t.slice.SeqLo)
	}
	tg := time.Now()
	var src TrajectorySource = t.Rollout
	if t.Source != nil {
		src = t.Source
	}
	if t.rolloutCopy != nil && src == TrajectorySource(t.Rollout) {
		if err := t.rolloutCopy.CopyWeightsFrom(t.Policy); err != nil {
			return nil, nil, err
		}
	}
	trajs, err := src.Run(ctx, t.step, prompts)
	if err == nil {
		clock.since("gen", tg)
	}
	var baseline []float64
	if err == nil && cfg.Needs().Baseline {
		tb := time.Now()
		baseline, err = t.baselines(ctx, prompts, trajs)
		clock.since("gen_baseline", tb)
	}
	if t.rolloutCopy != nil {
		t.rolloutCopy.DiscardWeights() // rewritten before the next rollout
	}
	if err != nil {
		return nil, nil, err
	}
	return trajs, baseline, nil
}

// score packs the trajectories into a batch with their outcome rewards and,
// when configured, their process rewards; step mode packs turns
// (scoreSteps).
func (t *Trainer) score(trajs []*Trajectory, baseline []float64, m Metrics) (*Batch, error) {
	cfg := &t.Cfg
	if cfg.Rollout.Trajectory == TrajectoryStep {
		return t.scoreSteps(trajs, baseline, m)
	}
	b := FromTrajectories(trajs, cfg.Algorithm.AdvantageMask)
	b.BaselineScore = baseline
	scores := make([]float64, len(trajs))
	for i, tr := range trajs {
		scores[i] = cfg.Rollout.outcome(tr) // with the truncation penalty (budget.go)
	}
	if err := AddOutcome(b, scores); err != nil {
		return nil, err
	}
	if cfg.Algorithm.ProcessReward {
		rs := make([][]float64, len(trajs))
		for i, tr := range trajs {
			rs[i] = tr.ProcessRewards
		}
		if err := AddProcessRewards(b, t.ToolCallEnd, rs, cfg.Algorithm.PrimeNorm); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// logProbs fills in π_old, the reference log-probabilities and the
// critic's values, each where the config needs it.
func (t *Trainer) logProbs(b *Batch, clock stepClock) error {
	cfg := &t.Cfg
	var err error
	// With one epoch of one mini-batch the policy has not moved when the
	// loss is computed, so π_old is the update's own forward (verl sets
	// old_log_prob = log_prob.detach() there too): the ratio is exactly 1
	// and one forward pass is saved. Otherwise π_old is recomputed here.
	// Bypass mode (rollcorr_trainer.go): π_old is the sampler's, no forward.
	if !t.rollcorrBypass(b) && !t.reuseOld(b) {
		tl := time.Now()
		if b.OldLogProb, _, _, err = Forward(t.Policy, b, cfg.Actor.MicroBatchTokens); err != nil {
			return err
		}
		clock.since("old_log_prob", tl)
	}
	if cfg.NeedsRef() {
		tr := time.Now()
		if b.RefLogProb, _, _, err = Forward(t.Ref, b, cfg.Actor.MicroBatchTokens); err != nil {
			return err
		}
		t.Ref.DropWeightPages() // offloaded (Setup.RefOffloadDir): out of memory until the next step's scoring
		clock.since("ref", tr)
	}
	if cfg.NeedsCritic() {
		tv := time.Now()
		if _, _, b.OldValues, err = Forward(t.Critic, b, cfg.Critic.MicroBatchTokens); err != nil {
			return err
		}
		clock.since("values", tv)
	}
	return nil
}

// advantages gathers the global batch (Sync.GatherBatch), turns scores
// into per-token rewards (with the KL penalty when it is in the reward),
// runs the estimator and records the data metrics. It returns the global
// batch.
func (t *Trainer) advantages(b *Batch, clock stepClock) (*Batch, error) {
	cfg, m := &t.Cfg, clock.m
	ta := time.Now()
	// Rewards, advantages and data metrics over the global batch.
	b, s, err := t.sync().GatherBatch(b, t.slice)
	if err != nil {
		return nil, err
	}
	t.slice = s
	if cfg.Algorithm.UseKLInReward {
		kind, err := ParseKL(cfg.Algorithm.KLPenalty)
		if err != nil {
			return nil, err
		}
		km, err := ApplyKLPenalty(b, kind, t.KLCtrl)
		if err != nil {
			return nil, err
		}
		for k, v := range km {
			m[k] = v
		}
	} else if err := b.RewardsFromScores(); err != nil {
		return nil, err
	}
	if err := Estimate(b, &cfg.Algorithm.AdvantageConfig); err != nil {
		return nil, err
	}
	dm, err := DataMetrics(b)
	if err != nil {
		return nil, err
	}
	for k, v := range dm {
		m[k] = v
	}
	clock.since("adv", ta)
	return b, nil
}

// updateModels runs the critic's update, then the actor's once the
// critic's warm-up is over.
func (t *Trainer) updateModels(b *Batch, clock stepClock) error {
	cfg, m := &t.Cfg, clock.m
	if cfg.NeedsCritic() {
		tc := time.Now()
		cm, err := t.updateCritic(b)
		if err != nil {
			return err
		}
		for k, v := range cm {
			m[k] = v
		}
		clock.since("update_critic", tc)
	}
	// Rollout mismatch and correction (rollcorr_trainer.go): measured on
	// the global batch, corrections applied for the actor update only.
	undo, err := t.rollcorrBegin(b, m)
	if err != nil {
		return err
	}
	defer undo()
	if !cfg.Algorithm.LossMask {
		// The "loss mask disabled" ablation, for the actor's update only:
		// the batch keeps its action mask for the rollout dump.
		resp, err := b.ResponseMask()
		if err != nil {
			return err
		}
		action := b.ActionMask
		b.ActionMask = resp
		defer func() { b.ActionMask = action }()
	}
	if !cfg.NeedsCritic() || t.step >= cfg.Critic.Warmup {
		tu := time.Now()
		am, err := t.updateActor(b)
		if err != nil {
			return err
		}
		for k, v := range am {
			m[k] = v
		}
		clock.since("update_actor", tu)
	}
	return nil
}

// baselines rolls every prompt out once more, greedily, from the weights
// that sampled trajs, and returns each trajectory's baseline: the score of
// its prompt's greedy response (ReMax's baseline, as verl's trainer makes
// it).
func (t *Trainer) baselines(ctx context.Context, prompts []data.Sample, trajs []*Trajectory) ([]float64, error) {
	cfg := t.Cfg.Rollout
	cfg.N, cfg.Sampling = 1, model.Greedy
	r := *t.Rollout
	r.Cfg = &cfg
	greedy, err := r.Run(ctx, t.step, prompts)
	if err != nil {
		return nil, fmt.Errorf("rl: the greedy baseline rollout: %w", err)
	}
	out := make([]float64, len(trajs))
	for i, tr := range trajs {
		out[i] = greedy[tr.Group].Outcome.Reward
	}
	return out, nil
}

// reuseOld says whether π_old is taken from the update's forward.
func (t *Trainer) reuseOld(b *Batch) bool {
	c := &t.Cfg
	n := t.slice.Global // the global batch decides
	return c.Actor.PPOEpochs == 1 && c.Actor.MiniBatchSize >= n && !c.Algorithm.UseKLInReward && !c.rollcorrNeedsOld()
}

// lossStep is one micro-batch's loss and backward pass: it reads the
// model's outputs res for mb, fills out with the loss against norm, and
// back-propagates through mdl.
type lossStep func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error

// updateActor runs the policy's mini-batch updates with the actor loss.
func (t *Trainer) updateActor(b *Batch) (Metrics, error) {
	a := &t.Cfg.Actor
	lc := t.rollcorrLossConfig() // the config's, or bypass mode's reinforce loss
	return t.update(b, t.Policy, t.ActorOpt, "actor", updateShape{a.UpdateConfig, lc.AggMode, lc.LossScaleFactor}, func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error {
		mb.LogProb = shiftIn(mb, nil, res.LogProb)
		mb.Entropy = shiftIn(mb, nil, res.Entropy)
		if b.OldLogProb == nil {
			mb.OldLogProb = mb.LogProb
		}
		// rollcorr_trainer.go: records these log-probs; bypass mode's correction
		mb, cm, err := t.rollcorrMicro(mb)
		if err != nil {
			return err
		}
		if err := ActorLoss(mb, lc, norm, out); err != nil {
			return err
		}
		for k, v := range cm {
			out.Metrics[k] = v
		}
		return mdl.Backward(shiftOut(mb, out.DLogProb), shiftOut(mb, out.DEntropy), nil)
	})
}

// updateCritic runs the value model's mini-batch updates with the clipped
// value loss.
func (t *Trainer) updateCritic(b *Batch) (Metrics, error) {
	c := &t.Cfg.Critic
	clip := c.CliprangeValue
	return t.update(b, t.Critic, t.CriticOpt, "critic", updateShape{c.UpdateConfig, c.AggMode, c.LossScaleFactor}, func(mdl *model.Model, mb *Batch, res *model.Output, norm Norm, out *Output) error {
		mb.Values = shiftIn(mb, nil, res.Values)
		if err := CriticLoss(mb, clip, norm, out); err != nil {
			return err
		}
		return mdl.Backward(nil, nil, shiftOut(mb, out.DValue))
	})
}

// updateShape is one model's update settings: its UpdateConfig and how its
// loss aggregates.
type updateShape struct {
	UpdateConfig
	agg   AggMode
	scale float64 // loss_scale_factor
}

// update runs ppo_epochs passes of mini-batch updates of mdl with gradient
// accumulation over micro-batches, all shaped by u, step computing each
// micro-batch's loss and gradients; prefix names the optimizer's metrics
// (actor/grad_norm).
func (t *Trainer) update(b *Batch, mdl *model.Model, opt *optim.AdamW, prefix string, u updateShape, step lossStep) (Metrics, error) {
	var all []Metrics
	cuts := miniBatches(b, u.MiniBatchSize)
	for epoch := 0; epoch < u.PPOEpochs; epoch++ {
		for c := 0; c+1 < len(cuts); c++ {
			lo, hi := cuts[c], cuts[c+1]
			mini := b.Slice(lo, hi)
			norm, err := NewNorm(u.agg, mini, u.scale)
			if err != nil {
				if t.rollcorrRejectedAll(mini) { // every token rejected (rollcorr_trainer.go): no update
					continue
				}
				return nil, err
			}
			t.sync().ZeroGrads(mdl, opt) // ZeRO-2: the arena is kept zero, and the backward sends its buckets
			mm := Metrics{}
			own := t.slice.Own(mini, lo, hi) // this process's part of the global mini-batch
			cuts := MicroBatches(own, u.MicroBatchTokens)
			idle, err := t.sync().IdleRounds(mdl, opt, len(cuts)-1) // ZeRO-2: micro-batches short of the busiest rank's
			if err != nil {
				return nil, err
			}
			var out Output
			for j := 0; j+1 < len(cuts); j++ {
				mb := own.Slice(cuts[j], cuts[j+1])
				res, err := mdl.Forward(scoredBatch(mb, mb.ActionMask), true) // the head on the loss's tokens only
				if err != nil {
					return nil, err
				}
				if err := step(mdl, mb, res, norm, &out); err != nil {
					return nil, err
				}
				for k, v := range out.Metrics {
					if SumMetrics[k] {
						mm[k] += v
					} else {
						mm[k] += v / float64(len(cuts)-1)
					}
				}
			}
			t.sync().Idle(opt, idle)
			if mm, err = t.sync().ReduceMetrics(mm, len(cuts)-1); err != nil { // over the processes' micro-batches
				return nil, err
			}
			if opt.Offloaded() {
				mdl.DiscardActivations() // the moments come in: the activations make room
			}
			r, err := t.sync().Step(mdl, opt) // gradients summed over the processes
			if err != nil {
				return nil, err
			}
			mm[prefix+"/grad_norm"] = r.GradNorm
			mm[prefix+"/lr"] = r.LR
			if r.Skipped {
				mm[prefix+"/skipped_steps"] = 1
			}
			all = append(all, mm)
		}
	}
	return MeanMetrics(all), nil
}

// RolloutMetrics summarises trajectories under verl's names, num_turns/*
// and tool_call_counts/*, the share of each finish reason env/finish_*, and
// env/<name> for every metric the task's Outcome reports (the QA task's
// env/em, env/f1, env/cover_em, env/format): a new task adds metrics
// without touching this code.
func RolloutMetrics(trajs []*Trajectory) Metrics {
	m := Metrics{}
	turns, calls := make([]float64, len(trajs)), make([]float64, len(trajs))
	sums, counts := map[string]float64{}, map[string]float64{}
	finish := map[Finish]float64{}
	for i, t := range trajs {
		turns[i], calls[i] = float64(t.Turns), float64(t.ToolCalls)
		for k, v := range t.Outcome.Metrics {
			sums[k] += v
			counts[k]++
		}
		finish[t.Finish]++
	}
	n := float64(max(len(trajs), 1))
	m.putStats("num_turns", turns, nil)
	m.putStats("tool_call_counts", calls, nil)
	for k, s := range sums {
		m["env/"+k] = s / counts[k]
	}
	var cutResponses float64
	for _, t := range trajs {
		cutResponses += float64(t.TruncatedResponses)
	}
	for _, f := range []Finish{FinishAnswer, FinishMaxTurns, FinishLength, FinishContext, FinishTurnLimit} {
		m["env/finish_"+string(f)] = finish[f] / n
	}
	m["env/truncated_tool_responses"] = cutResponses / n
	return m
}
