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
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
	"github.com/r1go/r1go/rl/metrics"
)

// run is the whole training job, read top to bottom: assemble, warm start,
// evaluate, RL steps with validation and checkpoints, evaluate, summarise.
func run(ctx context.Context, cfg *Config, out io.Writer) (err error) {
	t0 := time.Now()
	// Every setting is checked before anything is created: a bad value
	// costs nothing and leaves no run folder behind.
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// data parallel: the launcher's rank and card; only rank 0 prints and writes.
	launch, lerr := dpLaunch(cfg)
	if lerr != nil {
		return lerr
	}
	out = rankOutput(launch, out)
	if cfg.Trainer.DryRun {
		_, _, err := planRun(cfg, launch, nil, out)
		return err
	}
	// A dead retriever is found now, before the run folder, the device and
	// the model, not by a policy that seldom searches.
	if err := cfg.Env.ProbeRetriever(ctx, func(s string) { fmt.Fprintln(out, s) }); err != nil {
		return err
	}
	dir := cfg.Trainer.DefaultLocalDir
	if dir == "" {
		dir = filepath.Join("runs", cfg.Trainer.Project, cfg.Trainer.Experiment)
	}
	release := func() {}
	if launch.Rank == 0 { // rank 0 owns the run folder; the other ranks write nothing there
		if release, err = claimRunFolder(dir, cfg.Trainer.Resume, cfg.Trainer.Overwrite, func(s string) { fmt.Fprintln(out, s) }); err != nil {
			return err
		}
	}
	defer release()
	if launch.Rank == 0 {
		if err := saveConfig(cfg, filepath.Join(dir, "config.yaml")); err != nil {
			return err
		}
	}
	var resume *trainerState
	if cfg.Trainer.Resume {
		if resume, err = latestCheckpoint(dir); err != nil {
			return err
		}
		if n, err := truncateMetrics(filepath.Join(dir, "metrics.jsonl"), resume.Step); err != nil {
			return err
		} else if n > 0 {
			fmt.Fprintf(out, "resume: dropped %d metrics.jsonl records after step %d (logged after the checkpoint)\n", n, resume.Step)
		}
	}
	dev, note, err := pickDevice(cfg)
	if err != nil {
		return err
	}
	par, stopDP, err := startDP(cfg, launch, dev) // data parallel: join the ranks (nil: one process)
	if err != nil {
		return err
	}
	defer func() { stopDP(err == nil) }()
	fmt.Fprintf(out, "r1go train: run folder %s, device %s\n", dir, dev.Name())
	if note != "" {
		fmt.Fprintln(out, note)
	}
	warnTinyDefaults(cfg, out)
	stop, saveBytes, err := planRun(cfg, launch, dev, out)
	if stop || err != nil {
		return err
	}
	mc := cfg.Model
	mc.Frozen = cfg.RL.Actor.LoRA.Enabled()                                                              // a LoRA base: no gradients, and a bf16 folder stays bf16
	s, err := agent.Build(ctx, mc, cfg.Data, cfg.Env, dev, rankDataDir(par, filepath.Join(dir, "data"))) // data parallel: a work folder per rank
	if err != nil {
		return err
	}
	s.Policy.Recompute, s.Policy.SaveBytes = cfg.Trainer.Recompute, saveBytes
	defer s.Close()
	if err := setupLoRA(cfg, s); err != nil {
		return err
	}
	useMixed(s.Policy)
	if len(s.Train) == 0 {
		return fmt.Errorf("data.train_files is empty: train needs training questions (data.val_files alone is for cmd/eval)")
	}
	fmt.Fprintf(out, "data: %d train, %d validation, %d test questions; policy %d parameters, vocabulary %d\n",
		len(s.Train), len(s.Val), len(s.Test), s.Policy.NumParams(), s.Tok.VocabSize())
	skipped, err := checkData(cfg, s, out)
	if err != nil {
		return err
	}

	heldOut := s.Test
	if len(heldOut) == 0 {
		heldOut = s.Val
	}
	evalCfg := agent.EvalConfig{Rollout: agent.EvalRollout(cfg.RL.Rollout), MaxContext: cfg.Model.MaxContext}
	sftDir, initEval := initialPolicy(cfg, dir)

	// 1. Supervised warm start on gold trajectories, then the held-out
	// score that RL has to beat. A resumed run skips both: its policy is in
	// the checkpoint and the warm-started policy is the reference.
	var before agent.Results
	if resume == nil {
		if err := warmStart(ctx, cfg, s, out); err != nil {
			return err
		}
		if err := syncWarmStart(par, s.Policy); err != nil { // data parallel
			return err
		}
		if par.Rank0() && sftDir == filepath.Join(dir, "sft") {
			if err := savePolicy(s.Policy, sftDir, s.TokenizerDir, "float32"); err != nil {
				return err
			}
		}
		if before, _, err = agent.EvaluateProgress(ctx, s, s.Policy, heldOut, evalCfg, 0, out, "held-out "+baseName(cfg)); err != nil {
			return err
		}
		if par.Rank0() {
			if err := writeJSON(initEval, before); err != nil {
				return err
			}
		}
		if par != nil { // the other ranks read sftDir (the reference policy) next
			if err := par.Comm.Barrier(); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%s: held-out EM %.3f (cover EM %.3f, %.2f tool calls per question)\n",
			baseName(cfg), before["all"].EM, before["all"].CoverEM, before["all"].ToolCalls)
	} else {
		if err := readJSON(initEval, &before); err != nil {
			return err
		}
		if err := restorePolicy(s.Policy, resume.dir); err != nil {
			return err
		}
		fmt.Fprintf(out, "resuming from %s at step %d\n", resume.dir, resume.Step)
	}

	// 2. Reinforcement learning.
	tr, err := newTrainer(cfg, s, sftDir, par)
	if err != nil {
		return err
	}
	if par.Rank0() {
		tr.Phase = slowPhases(out, tr)
	}
	stopExternal, err := startExternal(cfg, s, tr, out)
	if err != nil {
		return err
	}
	defer stopExternal()
	if resume != nil {
		if err := resume.restore(tr); err != nil {
			return err
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
		return err
	}
	defer log.Close()
	hist := metrics.NewHistory("critic/score/mean", "env/em", "val-core/all/em")
	if resume != nil {
		// The plot covers the whole run, not only this invocation.
		if err := replayHistory(hist, filepath.Join(dir, "metrics.jsonl"), resume.Step); err != nil {
			fmt.Fprintln(out, "plot: steps before the resume are left out:", err)
		}
	}
	sampler, err := data.NewSampler(len(s.Train), data.SamplerConfig{BatchSize: cfg.Data.TrainBatchSize, Seed: cfg.Data.Seed, Shuffle: true})
	if err != nil {
		return err
	}
	if resume != nil {
		if err := sampler.Restore(resume.Sampler); err != nil {
			return fmt.Errorf("trainer.resume: %w", err)
		}
	}
	valCfg := evalCfg
	guard := newRunGuard(cfg, dir, out, s, launch.Rank == 0)
	done := 0
	for tr.Steps() < cfg.Trainer.TotalSteps {
		if cfg.Trainer.StopAfter > 0 && done == cfg.Trainer.StopAfter {
			fmt.Fprintf(out, "stopping after %d steps as trainer.stop_after asks\n", done)
			return nil
		}
		step := tr.Steps()
		var prompts []data.Sample
		for _, i := range sampler.Next() {
			prompts = append(prompts, s.Train[i])
		}
		s.ToolStats().Take() // calls outside the step's rollouts (validation, warm start) are not its
		res, err := tr.Step(ctx, prompts)
		if err != nil {
			return fmt.Errorf("step %d: %w (%s)", step+1, err, lastGood(dir))
		}
		// The step's tool faults: counted in its metrics, warned about when
		// most calls failed, fatal above trainer.max_tool_error_rate.
		tools := s.ToolStats().Take()
		maps.Copy(res.Metrics, tools.Metrics())
		res.Metrics["data/skipped_records"] = float64(skipped)
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
			vr, vtrajs, err := agent.Evaluate(ctx, s, s.Policy, s.Val, valCfg)
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
			save := func() error { return guard.save(tr, sampler.State()) }
			if err := checkpointAll(par, save, tr); err != nil { // data parallel
				return err
			}
		}
		done++
	}

	// 3. Held-out evaluation of the trained policy and the summary.
	after, _, err := agent.EvaluateProgress(ctx, s, s.Policy, heldOut, evalCfg, 0, out, "held-out after RL")
	if err != nil {
		return err
	}
	if !par.Rank0() { // data parallel: rank 0 writes the results
		return nil
	}
	if err := writeJSON(filepath.Join(dir, "eval.json"), after); err != nil {
		return err
	}
	plot := filepath.Join(dir, "training.png")
	series := hist.Series()
	chart := trainingChart(cfg, series)
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

// warmStart runs the supervised warm start on the gold trajectories that
// the SFT options select.
func warmStart(ctx context.Context, cfg *Config, s *agent.Setup, out io.Writer) error {
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
	ro := &rl.Rollout{Tok: s.Tok, Env: s.Env, Stop: s.Stop}
	params, grads := s.Policy.Trainable() // the adapters in a LoRA run
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
	if tr.Ref != nil && tr.Ref != ref {
		useMixed(tr.Ref) // the frozen warm start: bf16 on a device that computes in it
	}
	return tr, nil
}

func summarise(out io.Writer, cfg *Config, dir string, before, after agent.Results, took time.Duration) {
	fmt.Fprintf(out, "\n== r1go train: done in %s\n", took.Round(time.Second))
	baseCol := "SFT"
	if cfg.SFT.Steps == 0 {
		baseCol = "before"
	}
	fmt.Fprintf(out, "%-22s %8s %8s %8s\n", "held-out", baseCol, "RL", "gain")
	for _, src := range after.Sources() {
		b, a := before[src], after[src]
		if b == nil || a == nil {
			continue
		}
		fmt.Fprintf(out, "%-22s %8.3f %8.3f %+8.3f   (EM, %d questions)\n", src, b.EM, a.EM, a.EM-b.EM, a.N)
	}
	if a, b := after["all"], before["all"]; a != nil && b != nil {
		fmt.Fprintf(out, "%-22s %8.3f %8.3f %+8.3f\n", "cover EM", b.CoverEM, a.CoverEM, a.CoverEM-b.CoverEM)
		fmt.Fprintf(out, "%-22s %8.2f %8.2f\n", "tool calls / question", b.ToolCalls, a.ToolCalls)
	}
	fmt.Fprintf(out, "\nsaved: %s (policy: %s, metrics: %s, plot: %s)\n", dir,
		filepath.Join(dir, fmt.Sprintf("global_step_%d", cfg.Trainer.TotalSteps), "actor"), filepath.Join(dir, "metrics.jsonl"), filepath.Join(dir, "training.png"))
	fmt.Fprintf(out, "evaluate: %s\n", evalCommand(cfg, filepath.Join(dir, fmt.Sprintf("global_step_%d", cfg.Trainer.TotalSteps), "actor")))
	fmt.Fprintf(out, "continue: go run ./cmd/train -config %s trainer.resume=true trainer.total_training_steps=%d\n",
		filepath.Join(dir, "config.yaml"), cfg.Trainer.TotalSteps*2)
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
