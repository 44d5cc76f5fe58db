package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
	"github.com/r1go/r1go/rl/metrics"
)

// run is the whole training job in four phases, read top to bottom:
// prepare (settings, run folder, device, data parallel, memory plan,
// model and data), the warm start and the held-out score RL must beat,
// the RL steps with validation and checkpoints, and the report (held-out
// evaluation of the trained policy, plot, summary).
func run(ctx context.Context, cfg *Config, out io.Writer) (err error) {
	t0 := time.Now()
	j, err := prepare(ctx, cfg, out)
	if j == nil || err != nil { // a dry run, a plan that does not fit, or an error
		return err
	}
	defer func() { j.close(err == nil) }()
	before, err := j.warmStart(ctx)
	if err != nil {
		return err
	}
	if j.rollRank >= 0 { // dp.rollout_ranks: this rank only rolls out
		finished, err := j.serveRollout(ctx)
		if !finished || err != nil {
			return err
		}
		return j.report(ctx, nil, nil, before, t0)
	}
	tr, hist, err := j.train(ctx)
	if tr == nil || err != nil { // stopped early (trainer.stop_after), or an error
		return err
	}
	return j.report(ctx, tr, hist, before, t0)
}

// job is one training run's state as it passes from phase to phase.
type job struct {
	cfg    *Config
	out    io.Writer // the console: rank 0's, io.Discard on the others
	launch comm.Launch
	dir    string        // the run folder
	resume *trainerState // the checkpoint resumed from; nil for a fresh run
	par    *dp.DP        // data parallel; nil in a run of one process
	// trainPar is the trainer ranks' data parallel: par, or with rollout
	// ranks (dp.rollout_ranks) a communicator of the trainer ranks alone,
	// nil with one trainer rank. rollRank is this rank's place among the
	// rollout ranks, -1 on a trainer rank.
	trainPar *dp.DP
	rollRank int
	s        *agent.Setup

	saveBytes int64 // the activations the plan lets the policy keep
	skipped   int   // malformed data records skipped
	heldOut   []data.Sample
	evalCfg   agent.EvalConfig
	sftDir    string // the warm-started policy: the reference and critic start
	initEval  string // its held-out results
	closers   []func(ok bool)
}

// close releases what the phases opened, the last first; ok says whether
// the run succeeded (the ranks leave together only then).
func (j *job) close(ok bool) {
	for i := len(j.closers) - 1; i >= 0; i-- {
		j.closers[i](ok)
	}
	j.closers = nil
}

// prepare checks every setting, claims the run folder, opens the device,
// joins the ranks, prints the memory plan and builds the model, the
// tokenizer, the data and the environment. It returns a nil job when the
// run stops here: a dry run, or a plan that does not fit (err says so).
func prepare(ctx context.Context, cfg *Config, out io.Writer) (j *job, err error) {
	// Every setting is checked before anything is created: a bad value
	// costs nothing and leaves no run folder behind.
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// data parallel: the launcher's rank and card, read once; only rank 0
	// prints and writes.
	launch, err := dpLaunch(cfg)
	if err != nil {
		return nil, err
	}
	out = rankOutput(launch, out)
	if err := validateRolloutRanks(cfg, launch); err != nil {
		return nil, err
	}
	if cfg.Trainer.DryRun {
		_, _, err := planRun(cfg, launch, nil, out)
		return nil, err
	}
	// A dead retriever is found now, before the run folder, the device and
	// the model, not by a policy that seldom searches.
	if err := cfg.Env.ProbeRetriever(ctx, func(s string) { fmt.Fprintln(out, s) }); err != nil {
		return nil, err
	}
	jb := &job{cfg: cfg, out: out, launch: launch, rollRank: rolloutRank(cfg, launch), dir: cmp.Or(cfg.Trainer.DefaultLocalDir, filepath.Join("runs", cfg.Trainer.Project, cfg.Trainer.Experiment))}
	defer func() {
		if j == nil { // stopped here: release what was opened
			jb.close(err == nil)
		}
	}()
	if err := jb.claim(); err != nil {
		return nil, err
	}
	dev, note, err := pickDevice(cfg)
	if err != nil {
		return nil, err
	}
	if c, ok := dev.(interface{ Close() error }); ok {
		// The first closer runs last: after data parallel stops
		// (R1GO_CUDA_MEMSTATS=1 prints the memory figures here).
		jb.closers = append(jb.closers, func(bool) { c.Close() })
	}
	par, stopDP, err := startDP(cfg, launch, dev) // data parallel: join the ranks (nil: one process)
	if err != nil {
		return nil, err
	}
	jb.par, jb.trainPar = par, par
	jb.closers = append(jb.closers, stopDP)
	if cfg.DP.RolloutRanks > 0 {
		tp, closeTP, err := splitTrainers(cfg, launch, par, dev)
		if err != nil {
			return nil, err
		}
		jb.trainPar = tp
		jb.closers = append(jb.closers, closeTP)
	}
	fmt.Fprintf(out, "r1go train: run folder %s, device %s\n", jb.dir, dev.Name())
	if note != "" {
		fmt.Fprintln(out, note)
	}
	warnTinyDefaults(cfg, out)
	stop, saveBytes, err := planRun(cfg, launch, dev, out)
	if stop || err != nil {
		return nil, err
	}
	jb.saveBytes = saveBytes
	if err := jb.build(ctx, dev); err != nil {
		return nil, err
	}
	return jb, nil
}

// claim takes the run folder (rank 0 owns it; the other ranks write
// nothing there), saves the config, and finds the checkpoint to resume.
func (j *job) claim() error {
	cfg := j.cfg
	if j.launch.Rank == 0 {
		release, err := claimRunFolder(j.dir, cfg.Trainer.Resume, cfg.Trainer.Overwrite, func(s string) { fmt.Fprintln(j.out, s) })
		if err != nil {
			return err
		}
		j.closers = append(j.closers, func(bool) { release() })
		if err := saveConfig(cfg, filepath.Join(j.dir, "config.yaml")); err != nil {
			return err
		}
	}
	if !cfg.Trainer.Resume {
		return nil
	}
	var err error
	if j.resume, err = latestCheckpoint(j.dir); err != nil {
		return err
	}
	if n, err := truncateMetrics(filepath.Join(j.dir, "metrics.jsonl"), j.resume.Step); err != nil {
		return err
	} else if n > 0 {
		fmt.Fprintf(j.out, "resume: dropped %d metrics.jsonl records after step %d (logged after the checkpoint)\n", n, j.resume.Step)
	}
	return nil
}

// build makes the model, the tokenizer, the data and the environment on
// dev, and checks the data.
func (j *job) build(ctx context.Context, dev model.Device) error {
	cfg := j.cfg
	mc := cfg.Model
	mc.Frozen = cfg.RL.Actor.LoRA.Enabled()                                                                  // a LoRA base: no gradients, and a bf16 folder stays bf16
	s, err := agent.Build(ctx, mc, cfg.Data, cfg.Env, dev, rankDataDir(j.par, filepath.Join(j.dir, "data"))) // data parallel: a work folder per rank
	if err != nil {
		return err
	}
	j.s = s
	j.closers = append(j.closers, func(bool) { s.Close() })
	s.Policy.Recompute, s.Policy.SaveBytes = cfg.Trainer.Recompute, j.saveBytes
	if err := setupLoRA(cfg, s); err != nil {
		return err
	}
	useMixed(s.Policy)
	if len(s.Train) == 0 {
		return fmt.Errorf("data.train_files is empty: train needs training questions (data.val_files alone is for cmd/eval)")
	}
	fmt.Fprintf(j.out, "data: %d train, %d validation, %d test questions; policy %d parameters, vocabulary %d\n",
		len(s.Train), len(s.Val), len(s.Test), s.Policy.NumParams(), s.Tok.VocabSize())
	if j.skipped, err = checkData(cfg, s, j.out); err != nil {
		return err
	}
	j.heldOut = s.Test
	if len(j.heldOut) == 0 {
		j.heldOut = s.Val
	}
	j.evalCfg = agent.EvalConfig{Rollout: agent.EvalRollout(cfg.RL.Rollout), MaxContext: cfg.Model.MaxContext}
	j.sftDir, j.initEval = initialPolicy(cfg, j.dir)
	return nil
}

// warmStart is the supervised warm start on gold trajectories, then the
// held-out score that RL has to beat. A resumed run skips both: its policy
// is in the checkpoint and the warm-started policy is the reference.
func (j *job) warmStart(ctx context.Context) (before agent.Results, err error) {
	cfg, s, par, out := j.cfg, j.s, j.par, j.out
	if j.resume != nil {
		if err := readJSON(j.initEval, &before); err != nil {
			return nil, err
		}
		if err := restorePolicy(s.Policy, j.resume.dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "resuming from %s at step %d\n", j.resume.dir, j.resume.Step)
		return before, nil
	}
	if err := sft(ctx, cfg, s, out); err != nil {
		return nil, err
	}
	if err := syncWarmStart(par, s.Policy); err != nil { // data parallel
		return nil, err
	}
	if par.Rank0() && j.sftDir == filepath.Join(j.dir, "sft") {
		if err := savePolicy(s.Policy, j.sftDir, s.TokenizerDir, "float32"); err != nil {
			return nil, err
		}
	}
	if before, _, err = agent.EvaluateProgress(ctx, s, s.Policy, j.heldOut, j.evalCfg, 0, out, "held-out "+baseName(cfg)); err != nil {
		return nil, err
	}
	if par.Rank0() {
		if err := writeJSON(j.initEval, before); err != nil {
			return nil, err
		}
	}
	if par != nil { // the other ranks read sftDir (the reference policy) next
		if err := par.Comm.Barrier(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "%s: held-out EM %.3f (cover EM %.3f, %.2f tool calls per question)\n",
		baseName(cfg), before["all"].EM, before["all"].CoverEM, before["all"].ToolCalls)
	return before, nil
}

// train runs the RL steps, with validation, the run guard and
// checkpoints. It returns a nil trainer when trainer.stop_after ends this
// invocation early, and the history the plot is drawn from.
func (j *job) train(ctx context.Context) (*rl.Trainer, *metrics.History, error) {
	cfg, s, par, out, dir := j.cfg, j.s, j.trainPar, j.out, j.dir
	tr, err := newTrainer(cfg, s, j.sftDir, par)
	if err != nil {
		return nil, nil, err
	}
	if par.Rank0() {
		tr.Phase = slowPhases(out, tr)
	}
	// Validation and the held-out test after RL decode in the rollout's
	// cache when the rollout samples from the policy itself (not a bf16
	// rollout copy, whose cache stores otherwise) and no external agents
	// share it: a second cache of the same size would double the memory.
	if rp, ok := tr.Rollout.Policy.(*rl.ModelPolicy); ok && rp.M == s.Policy && cfg.RL.Rollout.Mode != "external" {
		j.evalCfg.Policy = rp
	}
	stopExternal, err := startExternal(cfg, s, tr, out)
	if err != nil {
		return nil, nil, err
	}
	j.closers = append(j.closers, func(bool) { stopExternal() })
	if j.resume != nil {
		if err := j.resume.restore(tr); err != nil {
			return nil, nil, err
		}
	}
	sinks := cfg.Trainer.Logger
	if !par.Rank0() { // data parallel: rank 0 logs
		sinks = nil
	}
	log, err := metrics.Open(metrics.Config{Sinks: sinks, Dir: dir, Console: out, TotalSteps: cfg.Trainer.TotalSteps,
		Project: cfg.Trainer.Project, Experiment: cfg.Trainer.Experiment, TensorBoardDir: filepath.Join(dir, "tensorboard"),
		ProgressKeys: []string{"critic/score/mean", "env/em"}})
	if err != nil {
		return nil, nil, err
	}
	j.closers = append(j.closers, func(bool) { log.Close() })
	hist := metrics.NewHistory("critic/score/mean", "env/em", "val-core/all/em")
	if j.resume != nil {
		// The plot covers the whole run, not only this invocation.
		if err := replayHistory(hist, filepath.Join(dir, "metrics.jsonl"), j.resume.Step); err != nil {
			fmt.Fprintln(out, "plot: steps before the resume are left out:", err)
		}
	}
	sampler, err := data.NewSampler(len(s.Train), data.SamplerConfig{BatchSize: cfg.Data.TrainBatchSize, Seed: cfg.Data.Seed, Shuffle: true})
	if err != nil {
		return nil, nil, err
	}
	if j.resume != nil {
		if err := sampler.Restore(j.resume.Sampler); err != nil {
			return nil, nil, fmt.Errorf("trainer.resume: %w", err)
		}
	}
	if j.resume != nil && len(j.resume.asyncStates()) > 0 && !cfg.Trainer.Async {
		fmt.Fprintf(out, "resume: %s is an asynchronous run's checkpoint; training goes on synchronously from its sampler position, and groups trained before may be trained again\n",
			j.resume.dir)
	}
	if cfg.Trainer.Async && cfg.DP.RolloutRanks > 0 {
		if err := j.remoteRollout(tr); err != nil {
			return nil, nil, err
		}
	} else if cfg.Trainer.Async {
		a, closeDev, err := startAsync(ctx, cfg, s, tr, sampler, j.resume)
		if err != nil {
			closeDev()
			return nil, nil, err
		}
		stop := sync.OnceFunc(func() { a.Close(); closeDev() })
		j.closers = append(j.closers, func(bool) { stop() })
		defer stop() // before the held-out evaluation
	}
	guard := newRunGuard(cfg, dir, out, s, j.launch.Rank == 0)
	for done := 0; tr.Steps() < cfg.Trainer.TotalSteps; done++ {
		if cfg.Trainer.StopAfter > 0 && done == cfg.Trainer.StopAfter {
			fmt.Fprintf(out, "stopping after %d steps as trainer.stop_after asks\n", done)
			return nil, nil, nil
		}
		if err := j.step(ctx, tr, sampler, guard, log, hist); err != nil {
			return nil, nil, err
		}
	}
	return tr, hist, nil
}

// step runs one RL step on the sampler's next prompts, then its tool-fault
// check, the run guard, validation every trainer.test_freq steps, the
// metrics, and a checkpoint every trainer.save_freq steps and at the end.
func (j *job) step(ctx context.Context, tr *rl.Trainer, sampler *data.Sampler, guard *runGuard, log *metrics.Logger, hist *metrics.History) error {
	cfg, s, out := j.cfg, j.s, j.out
	step := tr.Steps()
	var prompts []data.Sample
	if tr.Async == nil { // an asynchronous rollout takes its own from the sampler
		prompts = samplerSource{sampler, s.Train}.Next()
	}
	s.ToolStats().Take() // calls outside the step's rollouts (validation, warm start) are not its
	res, err := tr.Step(ctx, prompts)
	if err != nil {
		return fmt.Errorf("step %d: %w (%s)", step+1, err, lastGood(j.dir))
	}
	// The step's tool faults: counted in its metrics, warned about when
	// most calls failed, fatal above trainer.max_tool_error_rate.
	tools := s.ToolStats().Take()
	maps.Copy(res.Metrics, tools.Metrics())
	res.Metrics["data/skipped_records"] = float64(j.skipped)
	warn, ferr := rl.CheckToolFaults(tr.Steps(), tools, cfg.Trainer.MaxToolErrorRate)
	if warn != "" {
		fmt.Fprintln(out, warn)
	}
	if ferr != nil {
		log.Log(tr.Steps(), res.Metrics)
		return ferr
	}
	if err := guard.afterStep(tr, res); err != nil {
		log.Log(tr.Steps(), res.Metrics) // the diverged step's numbers, for the post-mortem
		return err
	}
	m := map[string]float64(res.Metrics)
	if f := cfg.Trainer.TestFreq; f > 0 && tr.Steps()%f == 0 && len(s.Val) > 0 {
		tv := time.Now()
		vr, vtrajs, err := agent.Evaluate(ctx, s, s.Policy, s.Val, j.evalCfg)
		if err != nil {
			return err
		}
		if err := guard.validation(tr.Steps(), vtrajs); err != nil {
			return err
		}
		for k, v := range vr.Metrics() {
			m[k] = v
		}
		m["timing_s/testing"] = time.Since(tv).Seconds()
	}
	if err := log.Log(tr.Steps(), m); err != nil {
		return err
	}
	hist.Log(tr.Steps(), m)
	if f := cfg.Trainer.SaveFreq; (f > 0 && tr.Steps()%f == 0) || tr.Steps() == cfg.Trainer.TotalSteps {
		save := func() error { return guard.save(tr, samplerState(tr, sampler)) }
		if err := checkpointAll(j.trainPar, save, tr); err != nil { // data parallel
			return err
		}
	}
	return nil
}

// report evaluates the trained policy on the held-out questions and, on
// rank 0, writes eval.json, the plot and the summary.
func (j *job) report(ctx context.Context, tr *rl.Trainer, hist *metrics.History, before agent.Results, t0 time.Time) error {
	cfg, out, dir := j.cfg, j.out, j.dir
	after, _, err := agent.EvaluateProgress(ctx, j.s, j.s.Policy, j.heldOut, j.evalCfg, 0, out, "held-out after RL")
	if err != nil {
		return err
	}
	if !j.par.Rank0() { // data parallel: rank 0 writes the results
		return nil
	}
	if err := writeJSON(filepath.Join(dir, "eval.json"), after); err != nil {
		return err
	}
	plot := filepath.Join(dir, "training.png")
	chart := trainingChart(cfg, hist.Series())
	if tr.Steps() > 0 {
		if err := metrics.Plot(plot, chart); err != nil {
			fmt.Fprintln(out, "plot:", err)
		}
	}
	summarise(out, cfg, dir, before, after, time.Since(t0))
	return nil
}

// replayHistory logs into h the metrics that an earlier invocation wrote to
// path for steps up to upTo, the last record of each step winning (a run
// that crashed after logging a step but before its checkpoint logs the step
// again when resumed). A run without a JSONL file has nothing to replay; a
// malformed line is reported after the records before it are replayed.
func replayHistory(h *metrics.History, path string, upTo int) error {
	recs, err := metrics.ReadJSONL(path) // on a malformed line: the records before it, and why
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	last := map[int]map[string]float64{}
	for _, r := range recs {
		if r.Step <= upTo {
			last[r.Step] = r.Data
		}
	}
	for _, step := range slices.Sorted(maps.Keys(last)) {
		if lerr := h.Log(step, last[step]); lerr != nil {
			return lerr
		}
	}
	return err
}

// sft runs the supervised warm start on the gold trajectories that the
// SFT options select.
func sft(ctx context.Context, cfg *Config, s *agent.Setup, out io.Writer) error {
	if cfg.SFT.Steps == 0 {
		return nil
	}
	pool, err := synth.SFTSubset(s.Train, synth.SFTOptions{MaxHops: cfg.SFT.MaxHops, Fraction: cfg.SFT.Fraction,
		EarlyAnswer: cfg.SFT.EarlyAnswer, Seed: cfg.Data.Seed})
	if err != nil {
		return err
	}
	if len(pool) == 0 {
		return fmt.Errorf("sft: no training sample has a gold trajectory (sft.max_hops %d, sft.fraction %v)", cfg.SFT.MaxHops, cfg.SFT.Fraction)
	}
	ro := &rl.Rollout{Cfg: &cfg.RL.Rollout, Tok: s.Tok, Env: s.Env, Stop: s.Stop} // Cfg: step mode records turn samples
	params, grads := s.Policy.Trainable()                                         // the adapters in a LoRA run
	opt, err := optim.New(s.Policy.Dev, params, grads, cfg.SFT.Optim, cfg.SFT.Steps)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Data.Seed, 0x5f7))
	t0 := time.Now()
	for step := 0; step < cfg.SFT.Steps; step++ {
		batch := make([]*rl.Trajectory, cfg.SFT.BatchSize)
		for i := range batch {
			smp := pool[rng.IntN(len(pool))]
			turns := smp.Gold.Turns()
			if cfg.Env.Style == env.StyleSearchR1 { // the demonstrations speak the environment's protocol
				turns = env.SearchR1Turns(smp.Gold)
			}
			if batch[i], err = ro.Teacher(ctx, smp, turns, s.EndOfTurn); err != nil {
				return err
			}
		}
		loss, r, err := rl.SFTStep(s.Policy, opt, batch, cfg.RL.Actor.MicroBatchTokens)
		if err != nil {
			return fmt.Errorf("sft step %d: %w", step+1, err)
		}
		if (step+1)%20 == 0 || step == 0 || step+1 == cfg.SFT.Steps {
			fmt.Fprintf(out, "sft step %d/%d: loss %.4f, grad norm %.3f, lr %.2e (%.0f s)\n",
				step+1, cfg.SFT.Steps, loss, r.GradNorm, r.LR, time.Since(t0).Seconds())
		}
	}
	return nil
}

// initialPolicy returns the folder of the policy RL starts from (the
// reference and the critic's initialisation) and the file of its held-out
// evaluation. A warm start, or a tiny model made on the spot, is saved as
// sft/; a Hugging Face model that no SFT changed is its own folder, not
// copied.
func initialPolicy(cfg *Config, dir string) (policyDir, evalFile string) {
	if cfg.SFT.Steps == 0 && cfg.Model.Path != "" {
		return cfg.Model.Path, filepath.Join(dir, "initial_eval.json")
	}
	sft := filepath.Join(dir, "sft")
	return sft, filepath.Join(sft, "eval.json")
}

// newTrainer wires the trainer: the reference policy and the critic come
// from the warm-started policy in sftDir.
func newTrainer(cfg *Config, s *agent.Setup, sftDir string, par *dp.DP) (*rl.Trainer, error) {
	var ref *model.Model
	if cfg.RL.NeedsRef() {
		ref = loraRef(s) // a LoRA run's reference is its frozen base
	}
	offload, optimOffload := "", ""
	if cfg.Trainer.RefOffload {
		offload = cmp.Or(cfg.Trainer.OffloadDir, os.TempDir())
	}
	if cfg.Trainer.OptimOffload {
		optimOffload = cmp.Or(cfg.Trainer.OffloadDir, os.TempDir())
	}
	tr, err := rl.NewTrainer(cfg.RL, rl.Setup{Policy: s.Policy, RefDir: sftDir, Ref: ref, Recompute: cfg.Trainer.Recompute, SaveBytes: s.Policy.SaveBytes,
		Tok: s.Tok, Env: s.Env, Stop: s.Stop, ToolCallEnd: s.ToolCallEnd, RefOffloadDir: offload, OptimOffloadDir: optimOffload,
		Slots:      cfg.RL.Rollout.SlotsFor(cfg.Data.TrainBatchSize),
		MaxContext: cfg.Model.MaxContext, TotalSteps: cfg.Trainer.TotalSteps, PromptsPerStep: cfg.Data.TrainBatchSize,
		Sync: trainerSync(par)}) // data parallel: before the optimizers, which zero1 shards
	if err != nil {
		return nil, err
	}
	tr.Verifier = verifier(cfg, s)
	if tr.Ref != nil && tr.Ref != ref {
		useMixed(tr.Ref) // the frozen warm start: bf16 on a device that computes in it
	}
	return tr, nil
}

func saveConfig(cfg *Config, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := config.Dump(f, cfg); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// verifier is the trajectory verifier of the run (rollout.verify): the
// template checks follow the env's chat markup, for the styles whose
// observations are chat turns of their own (agent-r1, verl; Search-R1's
// sit inside the assistant turn and get the record checks only).
func verifier(cfg *Config, s *agent.Setup) *rl.Verifier {
	tok := s.Tok
	v := &rl.Verifier{Decode: func(ids []int32) string {
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return tok.Decode(out)
	}}
	if cfg.RL.Rollout.Mode != "external" { // external agents' turns end where the engine's requests said
		v.Stop = s.Stop
	}
	if st := cfg.Env.Style; st == env.StyleAgentR1 || st == env.StyleVerl {
		m := cfg.Env.Markup
		v.Template = rl.ChatTemplate{TurnStart: strings.TrimSuffix(m.AssistantStart, "assistant\n"), TurnEnd: m.TurnEnd,
			AssistantStart: m.AssistantStart, ResponseStart: m.ResponseStart, ResponseEnd: m.ResponseEnd}
	}
	return v
}
