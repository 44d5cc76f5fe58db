// Package rl implements the reinforcement-learning core of r1go: packed
// batches of multi-turn trajectories, advantage estimators, policy and value
// losses with analytic gradients, KL estimators and controllers, process
// rewards, and autodiff losses written as gorgonia expressions. The formulas
// are verl's (core_algos at b178a3c) with Agent-R1's handling of action
// tokens; where the two differ the package follows the choices recorded in
// the project's reference (agent-r1.md §7).
//
// # The central type: Batch
//
// A Batch is packed: each per-token field is one flat []float64 (or []bool,
// []int32) holding all tokens of all sequences back to back, and
//
//	sequence i occupies tokens [Offsets[i], Offsets[i+1])
//	token t of sequence i is at index Offsets[i] + t
//	len(per-token field) = N = Offsets[S],  len(per-sequence field) = S
//
// A sequence is its prompt (PromptLen[i] tokens) followed by its response:
// model turns interleaved with tool output and chat markup. ActionMask is
// true on the tokens the policy sampled; AdvantageMask on the tokens the
// estimator credits (normally the same; every response token for the paper's
// "advantage mask disabled" ablation, see Batch.ResponseMask). Masks are
// false on prompt tokens. Group holds a group id per sequence: the samples of
// one prompt. Micro-batches are Batch.Slice views of the mini-batch and share
// its memory.
//
// The paper's Table 4 ablations are two fields: "advantage mask disabled" sets
// AdvantageMask = ResponseMask() before Estimate; "loss mask disabled" sets
// ActionMask = ResponseMask() before the losses (after Estimate, so the
// advantages are still those of the chosen advantage mask). The trainer's
// keys are algorithm.advantage_mask and algorithm.loss_mask.
//
// OldLogProb is π_old. The trainer either recomputes it with the current
// weights before the first update of a step (verl's default) or reuses
// SampleLogProb; with one mini-batch and one epoch verl sets it to the
// current log-probs, so the ratio is exactly 1. The package reads only
// OldLogProb; which one it holds is the trainer's documented choice.
//
// # One step
//
//	AddOutcome / AddProcessRewards     → Scores (outcome on the last action token,
//	                                     process rewards at the end of each tool call)
//	ApplyKLPenalty or RewardsFromScores → Rewards
//	Estimate (gae, grpo, rloo, ...)     → Advantages, Returns (whole step's batch)
//	DataMetrics                         → critic/score/mean, critic/advantages/mean, ...
//	for each mini-batch: norm := NewNorm(agg, mini, loss_scale_factor)   (each model's own)
//	  for each micro-batch: ActorLoss(micro, cfg, norm, out), CriticLoss(...)
//	                        → out.Loss, out.DLogProb, out.DEntropy, out.DValue, out.Metrics
//
// Everything is float64 on the host: the model's float32 logprob, entropy and
// values go in through Widen, the gradients go back through Narrow. Losses
// aggregate with a Norm counted once on the mini-batch, so the losses and
// gradients of its micro-batches sum to the mini-batch's (verl's global token
// counts); no further scaling is needed for gradient accumulation.
//
// # Estimators and losses
//
// Every estimator has the signature Estimator(*Batch, *AdvantageConfig) and
// every loss Loss(*Batch, *LossConfig, Weights, *Output); both are found by
// name in a registry (RegisterEstimator, RegisterLoss; registration happens
// in init and panics on a duplicate name). Built-in estimators: gae, grpo
// (Dr.GRPO with NormAdvByStd false), rloo, reinforce_plus_plus,
// reinforce_plus_plus_baseline, remax (its baseline is a greedy rollout of
// each prompt, which the trainer makes because the registry says remax
// needs it). Built-in policy losses: vanilla (PPO clipped surrogate,
// clip-higher, dual clip), gspo, decoupled (AReaL's decoupled PPO,
// loss_decoupled.go) and bypass_reinforce (rollout correction's bypass
// mode, rollcorr_trainer.go). The critic's clipped
// value loss (ValueLoss, CriticLoss) is not in the registry: the critic has
// one loss, and its clip is critic.cliprange_value.
// ActorLoss adds the entropy bonus and the KL loss (KL estimators k1, abs,
// k2, k3/low_var_kl and their straight-through "+" forms) to the policy loss.
// Aggregation (token-mean, seq-mean-token-sum, seq-mean-token-mean,
// seq-mean-token-sum-norm) is an AggMode, kept apart from the loss math: a
// loss computes ℓ_t and dℓ_t/dx_t and multiplies by its sequence's weight.
//
// Speed: the losses are plain scalar Go loops, one pass over their inputs,
// split into chunks of whole sequences that run in parallel (the split
// depends only on the layout, so results do not depend on the thread count).
// The vanilla PPO loss is an ordinary registry entry like any other: the
// whole loss head is about 6.5e-7 of an actor update (benchmarks/rl -step),
// so the fused and vector PPO paths it once had are gone.
//
// Output gradients: DLogProb = dL/dLogProb, DEntropy = dL/dEntropy, DValue =
// dL/dValues, one entry per packed token (0 where the mask is false); a
// gradient the loss does not depend on is nil. Losses overwrite Output;
// estimators write Batch.Advantages and Returns, ApplyKLPenalty and
// RewardsFromScores write Rewards, AddOutcome and AddProcessRewards add to
// Scores, all reusing existing storage; nothing else writes an input field.
//
// # Autodiff losses
//
// A research loss can be written as a gorgonia expression over per-token
// vectors and registered like the built-ins; AutodiffLoss builds the graph
// once per shape, caches it, and returns the same Output. For example, a PPO
// variant that clips in log space, |log ρ| ≤ δ, instead of clipping ρ:
//
//	func init() { rl.RegisterLoss("log-clip", rl.AutodiffLoss(logClip)) }
//
//	func logClip(v *rl.Vars) (*gorgonia.Node, error) {
//		const delta = 0.2
//		logRatio, err := gorgonia.Sub(v.LogProb, v.OldLogProb)
//		if err != nil {
//			return nil, err
//		}
//		clipped := gorgonia.Must(gorgonia.MinBetween(
//			gorgonia.Must(gorgonia.MaxBetween(logRatio, v.Full(-delta))), v.Full(delta)))
//		negAdv := gorgonia.Must(gorgonia.Neg(v.Advantages))
//		unclippedLoss := gorgonia.Must(gorgonia.HadamardProd(negAdv, gorgonia.Must(gorgonia.Exp(logRatio))))
//		clippedLoss := gorgonia.Must(gorgonia.HadamardProd(negAdv, gorgonia.Must(gorgonia.Exp(clipped))))
//		// Pessimistic bound as in PPO; the first operand wins ties, so the
//		// gradient flows through the unclipped branch inside the range.
//		loss := gorgonia.Must(gorgonia.MaxBetween(unclippedLoss, clippedLoss))
//		v.Metric("actor/pg_clipfrac", gorgonia.Must(gorgonia.Gt(clippedLoss, unclippedLoss, true)))
//		return loss, nil
//	}
//
// Then LossConfig.PolicyLoss = "log-clip". The same mechanism is the test
// oracle for the hand-written gradients (autodiff_test.go).
//
// # Rollouts and the trainer
//
// Rollout (rollout.go) samples trajectories from a Policy (ModelPolicy
// wraps a model.Model and its KV cache) in a tool environment: each
// trajectory is a state machine (queued, prefill, decode, waiting for its
// tool, finished) and the scheduler (sched.go) feeds every ready
// trajectory's chunk to the model as one packed batch, so trajectories
// waiting for a tool leave the batch and rejoin when their observation is
// ready (continuous batching); samples of one prompt share its prefill
// (Policy.Fork). The Engine (engine.go), which serves the endpoint and the
// external rollout, runs its requests on the same scheduler. Sampled tokens are
// kept as sampled (action mask 1, with their sampling log-probabilities);
// the environment's text is encoded once and appended with mask 0; a turn
// ends at a stop token (</tool_call>, <|im_end|>) or max_turn_tokens, a
// trajectory at a turn without a tool call, the environment's max turns, or
// the response and context limits (Trajectory.Finish says which).
// RolloutConfig.Deterministic trades continuous batching for batches that
// are the same on every run, which a bit-exact resume needs.
//
// Trainer.Step (trainer.go) is one RL step read top to bottom, one method
// per phase: rollout,
// outcome and process rewards, π_old (recomputed, or the update's own
// forward when one epoch of one mini-batch leaves the policy unmoved),
// reference log-probabilities, critic values, KL in the reward, the
// estimator, then critic and actor updates over mini-batches with gradient
// accumulation over micro-batches, and AdamW. The policy samples the next
// rollout from the weights it was just updated with. SFTStep and
// Rollout.Teacher are the supervised warm start on gold trajectories.
//
// Data parallelism sits behind one interface, Sync (sync.go), that the
// trainer always calls: Shard the prompts, GatherBatch, ReduceMetrics,
// NewOptimizer, Step, SaveOptimizer. Local is a run of one process (the
// whole batch, the optimizer's own step); package rl/dp implements Sync
// over model.Comm with ZeRO stages 1 and 2.
//
// pack.go is the seam with the model: the model's per-token outputs describe
// the next token (its LogProb[t] is log p(x[t+1] | x[..t])), a Batch's the
// token itself, so values move one position right on the way in and
// gradients one position left on the way out.
//
// # A fork's path
//
// Each of the things a fork changes is one file with one registration in its
// init, enabled by a blank import; the config then names it
// (fork_example_test.go does all four from outside the package and runs
// each):
//
//   - a loss: rl.RegisterLoss("name", fn), fn a Loss (or AutodiffLoss);
//     actor.policy_loss=name. It reads its settings from the LossConfig it
//     is given, which is the actor section of the YAML file itself.
//   - an estimator: rl.RegisterEstimator("name", fn, needs), fn an
//     Estimator, needs what it reads that the trainer must provide (values
//     from a critic, a greedy baseline); algorithm.adv_estimator=name.
//   - a tool: env.RegisterTool("name", factory), the factory building an
//     env.Tool from env.ToolDeps (the run's retriever); env.tools=[search,
//     name]. Tools of one episode share env.Memory through the call's
//     context (lookup reads what search found).
//   - a reward: env.RegisterReward("name", fn); env.reward=name.
//
// Settings are declared once, on the library's own structs, with their
// defaults and Validate beside them: LossConfig is embedded in ActorConfig
// (verl's actor.* keys), AdvantageConfig in AlgorithmConfig, and the
// rollout's settings are Trainer.Cfg.Rollout, which Rollout points at. The
// path of actor.clip_ratio from its YAML key to the loss crosses five
// files: cmd/train/config.go (the run's Config inlines TrainerConfig),
// trainerconfig.go (ActorConfig embeds LossConfig), trainer.go
// (updateActor hands &Cfg.Actor.LossConfig to ActorLoss), loss.go (LossConfig.ClipRatio, its
// default, Validate, clipLow/clipHigh and the kernels' guard checkClip) and
// ppo.go (the PPO kernel reads it; GSPO's is gspo.go instead); the config
// loader in between is generic and names no key. NewTrainer(cfg, Setup)
// validates the whole config and wires the rollout, the reference policy,
// the critic and the optimizers; cmd/train/default.yaml holds the embedded
// run's departures from these library defaults (Agent-R1's).
//
// # Step mode
//
// With rollout.trajectory=step a trajectory is a sequence of turns, each a
// sample of its own: the prompt the episode built for it (env.Contexter:
// full, window, drop_observations, or the environment's own) and the
// policy's response (Trajectory.Steps, steps.go). FromSteps packs them,
// merging a turn whose prompt extends the previous turn's prompt and
// response token for token into that turn's sequence (steppack.go), so the
// full context packs the batch whole mode does; Batch.Traj names the
// trajectory of each sequence when a rewrite splits one. Estimators whose
// Needs say Trajectories credit a split trajectory as one: grpo, rloo and
// reinforce_plus_plus_baseline per trajectory, and the per-turn step_gae
// (Agent-R1's step-level GAE), step_grpo and step_rloo
// (advantage_step.go); Estimate refuses a split batch to the others. The
// length budgets and their finish reasons are budget.go's; the trajectory
// verifier, run on every step's records and packed batch, is verify.go's.
//
// # Rollout correction
//
// The sampler's log-probabilities (SampleLogProb) and the trainer's of the
// same tokens under the same weights differ (bf16 weights, other kernels,
// other CPU tiers). MismatchMetrics measures the gap every step
// (rollcorr_metrics.go); RolloutCorrection computes verl's truncated
// importance weights and rejection mask from it (rollcorr.go), which the
// trainer applies to the actor update, or, in bypass mode, uses the
// sampler's log-probabilities as π_old (rollcorr_trainer.go).
//
// # Errors
//
// Bad input is an error, never a silently propagated NaN: a missing field or
// a wrong length names the field; NaN or Inf on a token a computation reads
// names the field, index, sequence and token ("rl: LogProb[17] (sequence 2,
// token 5) is NaN"); an empty normaliser (no action tokens in a mini-batch),
// whitening over fewer than two tokens, out-of-range hyperparameters and
// unknown names are errors. Loss kernels check finiteness inside their single
// pass and locate the culprit only on failure. Panics are for programmer
// mistakes only: a duplicate registration, Slice out of range.
package rl
