package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/metrics"
)

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
	// Step mode evaluates in the contexts it trained in.
	add("rollout.trajectory", cfg.RL.Rollout.Trajectory, ev.Trajectory)
	add("env.context", string(cfg.Env.Context.Policy), string(def.Env.Context.Policy))
	add("env.context_turns", fmt.Sprint(cfg.Env.Context.Turns), fmt.Sprint(def.Env.Context.Turns))
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

// summarise prints the run's closing table: the held-out scores before and
// after RL, and the commands that evaluate and continue the run.
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
