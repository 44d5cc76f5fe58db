package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/metrics"
)

// runGuard is what run calls around each step: the divergence check, the
// entropy-collapse warning, the rollout dump and checkpointing with its
// housekeeping and progress lines. It keeps those out of run's main line.
type runGuard struct {
	cfg *Config
	dir string
	out io.Writer
	s   *agent.Setup
	ent entropyWatch
	// rank0 is whether this process writes the run folder (the
	// launcher's rank, read once by run).
	rank0 bool
}

func newRunGuard(cfg *Config, dir string, out io.Writer, s *agent.Setup, rank0 bool) *runGuard {
	return &runGuard{cfg: cfg, dir: dir, out: out, s: s, rank0: rank0,
		ent: entropyWatch{threshold: cfg.Trainer.EntropyCollapseThreshold, steps: cfg.Trainer.EntropyCollapseSteps}}
}

// dumpDir is where the rollout JSONL files go, or "": rank 0 of a
// data-parallel run writes them, so that no two processes write one file.
func (g *runGuard) dumpDir() string {
	d := g.cfg.Trainer.RolloutDataDir
	if !g.rank0 {
		return ""
	}
	if d == "" || filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(g.dir, d)
}

// afterStep checks the finished step, warns on collapse and dumps its
// trajectories. An error wraps ErrDiverged when the step must not be saved.
func (g *runGuard) afterStep(tr *rl.Trainer, res *rl.StepResult) error {
	step := tr.Steps()
	var models map[string]*model.Model
	if g.savesAt(step) {
		models = map[string]*model.Model{"actor": tr.Policy}
		if tr.Critic != nil {
			models["critic"] = tr.Critic
		}
	}
	if err := checkStep(step, res.Metrics, g.dir, models); err != nil {
		return err
	}
	if w := g.ent.observe(step, stepEntropy(res.Metrics, res.Trajectories)); w != "" {
		fmt.Fprintln(g.out, w)
	}
	if d := g.dumpDir(); d != "" {
		recs := rl.DumpRecords(step, res.Trajectories, rl.SplitAdvantages(res.Batch), g.s.Tok)
		if err := rl.WriteDump(filepath.Join(d, fmt.Sprintf("step_%d.jsonl", step)), recs); err != nil {
			return err
		}
	}
	return nil
}

// savesAt says whether run checkpoints after step (the same rule).
func (g *runGuard) savesAt(step int) bool {
	f := g.cfg.Trainer.SaveFreq
	return (f > 0 && step%f == 0) || step == g.cfg.Trainer.TotalSteps
}

// validation dumps the first trainer.log_val_generations validation
// trajectories of a validation after step (0: before training).
func (g *runGuard) validation(step int, trajs []*rl.Trajectory) error {
	d, n := g.dumpDir(), g.cfg.Trainer.LogValGenerations
	if d == "" || n == 0 || len(trajs) == 0 {
		return nil
	}
	recs := rl.DumpRecords(step, trajs[:min(n, len(trajs))], nil, g.s.Tok)
	return rl.WriteDump(filepath.Join(d, fmt.Sprintf("val_step_%d.jsonl", step)), recs)
}

// save writes the step's checkpoint with progress lines, then applies
// trainer.max_actor_ckpt_to_keep and drops older optimizer states.
func (g *runGuard) save(tr *rl.Trainer, pos data.SamplerState) error {
	t0 := time.Now()
	name := fmt.Sprintf("global_step_%d", tr.Steps())
	fmt.Fprintf(g.out, "checkpoint: saving %s\n", filepath.Join(g.dir, name))
	if err := saveCheckpoint(g.dir, tr, g.s, pos, g.cfg.Trainer.SaveDType); err != nil {
		return err
	}
	removed, err := pruneCheckpoints(g.dir, g.cfg.Trainer.MaxActorCkptToKeep, tr.Steps())
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("checkpoint: saved %s in %.1f s", name, time.Since(t0).Seconds())
	if len(removed) > 0 {
		msg += fmt.Sprintf("; removed %d older (trainer.max_actor_ckpt_to_keep=%d)", len(removed), g.cfg.Trainer.MaxActorCkptToKeep)
	}
	fmt.Fprintln(g.out, msg)
	return nil
}

// baseName says what the policy before RL is: the warm-started policy when
// SFT ran, otherwise the initial one.
func baseName(cfg *Config) string {
	if cfg.SFT.Steps > 0 {
		return "after SFT"
	}
	return "before RL"
}

// evalCommand is the cmd/eval line that scores actor on the data and
// environment this run used.
func evalCommand(cfg *Config, actor string) string {
	args := []string{"go run ./cmd/eval -model " + actor}
	def := DefaultConfig()
	// train's held-out set: the synthetic world's whole test split, or
	// the first data.val_size questions of the validation files.
	if len(cfg.Data.ValFiles) > 0 {
		args = append(args, "data.val_files=["+strings.Join(cfg.Data.ValFiles, ",")+"]")
		if cfg.Data.ValSize > 0 {
			args = append(args, fmt.Sprintf("data.val_size=%d", cfg.Data.ValSize))
		}
	}
	add := func(key, v, d string) {
		if v != d {
			args = append(args, key+"="+v)
		}
	}
	add("data.corpus", cfg.Data.Corpus, def.Data.Corpus)
	add("data.synth_seed", fmt.Sprint(cfg.Data.SynthSeed), fmt.Sprint(def.Data.SynthSeed))
	add("data.synth_train", fmt.Sprint(cfg.Data.SynthTrain), fmt.Sprint(def.Data.SynthTrain))
	add("data.synth_eval", fmt.Sprint(cfg.Data.SynthEval), fmt.Sprint(def.Data.SynthEval))
	add("env.retriever_url", cfg.Env.Retriever, def.Env.Retriever)
	add("env.index", cfg.Env.IndexPath, def.Env.IndexPath)
	add("env.style", string(cfg.Env.Style), string(def.Env.Style))
	add("env.format", cfg.Env.Format, def.Env.Format)
	add("env.topk", fmt.Sprint(cfg.Env.TopK), fmt.Sprint(def.Env.TopK))
	add("env.max_turns", fmt.Sprint(cfg.Env.MaxTurns), fmt.Sprint(def.Env.MaxTurns))
	add("env.max_tool_response_length", fmt.Sprint(cfg.Env.MaxResponseChars), fmt.Sprint(def.Env.MaxResponseChars))
	// eval's own default reward is train's, so it is passed only when changed.
	add("env.reward", cfg.Env.Reward, def.Env.Reward)
	add("env.instruction", quote(cfg.Env.Instruction), quote(def.Env.Instruction))
	add("env.prefill", quote(cfg.Env.Prefill), quote(def.Env.Prefill))
	ev := agent.DefaultEvalRollout()
	add("max_context", fmt.Sprint(cfg.Model.MaxContext), "1280")
	add("rollout.max_turn_tokens", fmt.Sprint(cfg.RL.Rollout.MaxTurnTokens), fmt.Sprint(ev.MaxTurnTokens))
	add("rollout.max_response_tokens", fmt.Sprint(cfg.RL.Rollout.MaxResponseTokens), fmt.Sprint(ev.MaxResponseTokens))
	return strings.Join(args, " ")
}

func quote(s string) string {
	if strings.ContainsAny(s, " \t'\"\\$") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

// tinyDefaults lists the settings whose default suits only the embedded
// tiny run, with the value the paper's setting uses.
func tinyDefaults(cfg *Config) []string {
	def := DefaultConfig()
	var out []string
	check := func(same bool, key, value, paper string) {
		if same {
			out = append(out, fmt.Sprintf("%s=%s (the paper's setting: %s)", key, value, paper))
		}
	}
	check(cfg.RL.Actor.Optim.LR == def.RL.Actor.Optim.LR, "actor.optim.lr", fmt.Sprint(def.RL.Actor.Optim.LR), "1e-6")
	check(cfg.Env.TopK == def.Env.TopK, "env.topk", fmt.Sprint(def.Env.TopK), "3 to 5")
	check(cfg.RL.Rollout.MaxTurnTokens == def.RL.Rollout.MaxTurnTokens, "rollout.max_turn_tokens", fmt.Sprint(def.RL.Rollout.MaxTurnTokens), "256 to 1024")
	check(cfg.Model.MaxContext == def.Model.MaxContext, "model.max_context", fmt.Sprint(def.Model.MaxContext), "8192 or more")
	check(cfg.RL.Rollout.MaxResponseTokens == def.RL.Rollout.MaxResponseTokens, "rollout.max_response_tokens", fmt.Sprint(def.RL.Rollout.MaxResponseTokens), "4096 to 8192")
	check(cfg.SFT.Steps == def.SFT.Steps && len(cfg.Data.TrainFiles) > 0, "sft.steps", fmt.Sprint(def.SFT.Steps), "0: the warm start needs the synthetic world's gold trajectories")
	check(cfg.RL.Actor.UseKLLoss == def.RL.Actor.UseKLLoss && cfg.RL.Algorithm.Estimator == "grpo", "actor.use_kl_loss", fmt.Sprint(def.RL.Actor.UseKLLoss), "true with kl_loss_coef 0.001 for GRPO")
	check(cfg.Env.MaxResponseChars == def.Env.MaxResponseChars, "env.max_tool_response_length", fmt.Sprint(def.Env.MaxResponseChars), "2048")
	return out
}

// warnTinyDefaults prints the tiny-only settings a run on a real model
// (model.path set) left at their defaults.
func warnTinyDefaults(cfg *Config, out io.Writer) {
	if cfg.Model.Path == "" {
		return
	}
	keys := tinyDefaults(cfg)
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(out, "warning: model.path is set but %d settings keep the tiny model's defaults; examples/ has configs for the paper's settings:\n", len(keys))
	for _, k := range keys {
		fmt.Fprintln(out, "  "+k)
	}
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

// trainingChart is the run's plot: its title says what is drawn and on
// which questions, and the validation series appears only with points.
func trainingChart(cfg *Config, series map[string][]metrics.Point) metrics.Chart {
	c := metrics.Chart{YLabel: "mean over the step's trajectories / validation questions", Series: map[string][]metrics.Point{
		"train reward (critic/score/mean, env." + cfg.Env.Reward + ")": series["critic/score/mean"],
		"train EM (env/em)": series["env/em"]}}
	title := "r1go " + cfg.Trainer.Experiment + ": training reward and EM per RL step"
	if v := series["val-core/all/em"]; len(v) > 0 {
		c.Series[fmt.Sprintf("validation EM (greedy, %d questions)", cfg.Data.ValSize)] = v
		title += ", validation EM"
	}
	c.Title = title
	return c
}

// slowPhase is how long a phase of an RL step runs before its end is
// printed: a real model's step takes minutes on the CPU, and the step's
// metrics line comes only at its end; the tiny default's phases stay quiet.
var slowPhase = 10 * time.Second // a variable for the test that sees every phase

// slowPhases prints a line as each slow phase of a step ends.
func slowPhases(out io.Writer, tr *rl.Trainer) func(string, time.Duration) {
	return func(name string, took time.Duration) {
		if took >= slowPhase {
			fmt.Fprintf(out, "step %d: %s done in %s\n", tr.Steps()+1, name, took.Round(100*time.Millisecond))
		}
	}
}
