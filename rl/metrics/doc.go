// Package metrics records a training run's metrics where users of verl look
// for them: a console line per step, a JSONL file, TensorBoard event files,
// a progress bar with an ETA, and a PNG plot at the end of the run.
//
// # The central type: Logger
//
// A Logger fans each step's metrics, a map from verl metric name to value,
// out to its sinks:
//
//	log, err := metrics.Open(metrics.Config{
//		Sinks:     []string{"console", "jsonl", "tensorboard"},
//		Dir:       runDir,                      // metrics.jsonl goes here
//		Project:   "agent-r1", Experiment: "grpo-hotpotqa",
//	})
//	...
//	err = log.Log(step, values)                 // once per step
//	err = log.Close()                           // flushes every sink
//
// Sinks: Console (verl's "step:N - key:value - ..." line, keys sorted),
// JSONL ({"step":N,"data":{...}} per line, written through at once),
// TensorBoard (events.out.tfevents.<unix seconds>.<hostname> in
// TensorBoardDir(project, experiment), which is $TENSORBOARD_DIR or
// tensorboard_log/{project}/{experiment}), Progress (progressbar/v3 over the
// total steps) and History (values kept in memory for Plot). Null returns a
// Logger with no sinks for tests. ReadJSONL and ReadEvents read the files back.
//
// # Names the trainer logs
//
// verl's names, so that existing dashboards and habits carry over:
//
//	critic/score/{mean,max,min}        outcome score from the reward function, per sequence
//	critic/rewards/{mean,max,min}      score after the KL penalty
//	critic/advantages/*, critic/returns/*, critic/values/*, critic/vf_explained_var
//	response_length/{mean,max,min,clip_ratio}, prompt_length/{...}   (AddLengthSummary)
//	num_turns/*, tool_call_counts/*    per trajectory (Summary)
//	actor/pg_loss, actor/pg_clipfrac, actor/pg_clipfrac_lower, actor/ppo_kl,
//	actor/entropy, actor/kl_loss, actor/kl_coef, actor/grad_norm, actor/lr
//	critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean, critic/grad_norm, critic/lr
//	timing_s/{gen,old_log_prob,ref,values,adv,update_critic,update_actor,step,testing,save_checkpoint}
//	timing_per_token_ms/{gen,ref,values,adv,update_critic,update_actor}   (Timer.Metrics)
//	perf/total_num_tokens, perf/time_per_step, perf/throughput            (Timer.Metrics)
//	training/global_step, training/epoch
//	val-core/{data_source}/reward/mean@{n}   validation score, the headline number
//	val-aux/{data_source}/{metric}/mean@{n}  other validation metrics (em, f1, ...)
//
// The rl package computes the critic/, actor/ and length metrics of a batch
// (rl.DataMetrics and the losses); this package adds the generic per-sample
// Summary, ClipRatio and the Timer for what the rollout loop and trainer
// measure themselves.
//
// # Numbers
//
// Console and JSONL write numbers with FormatNumber: integral values as
// integers, others as Python's repr of a float (shortest round-trip digits).
// JSONL writes NaN and ±Inf, which JSON lacks, as the strings "NaN",
// "Infinity" and "-Infinity". TensorBoard stores float32, as TensorFlow does.
//
// # Errors
//
// Every failure is an error, never a panic: a full disk, a closed file or a
// broken pipe comes back from Log or Close naming the sink, its file and the
// step ("metrics: jsonl sink /run/metrics.jsonl: step 7: write
// /run/metrics.jsonl: no space left on device"). A failing sink does not stop the others from receiving
// the step. The readers name the file and the line (JSONL) or the record
// index and byte offset (event files) of the first bad input, and return
// what they read before it.
package metrics
