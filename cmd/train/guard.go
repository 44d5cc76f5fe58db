package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// GuardConfig holds the run-folder and divergence keys, inlined into the
// trainer section (trainer.overwrite, trainer.entropy_collapse_*, ...).
type GuardConfig struct {
	Overwrite          bool `yaml:"overwrite" help:"wipe the run folder's earlier checkpoints and metrics instead of refusing to start over them"`
	MaxActorCkptToKeep int  `yaml:"max_actor_ckpt_to_keep" help:"keep only the newest N checkpoints (0: all)"`
	// The rollout dump (verl's trainer.rollout_data_dir and
	// log_val_generations): readable trajectories, see rl.WriteTrajectories.
	RolloutDataDir    string `yaml:"rollout_data_dir" help:"write each step's trajectories as JSONL here (relative: inside the run folder; empty: not at all)"`
	LogValGenerations int    `yaml:"log_val_generations" help:"validation trajectories written per validation to rollout_data_dir/val_step_N.jsonl (0: none)"`
	// EntropyCollapse: below Threshold for Steps consecutive steps.
	EntropyCollapseThreshold float64 `yaml:"entropy_collapse_threshold" help:"warn when the policy entropy (nats per action token) stays below this"`
	EntropyCollapseSteps     int     `yaml:"entropy_collapse_steps" help:"... for this many consecutive steps (0: never warn)"`
}

func defaultGuard() GuardConfig {
	return GuardConfig{RolloutDataDir: "rollouts", LogValGenerations: 16, EntropyCollapseThreshold: 0.05, EntropyCollapseSteps: 5}
}

// Validate checks the guard keys.
func (g *GuardConfig) Validate() error {
	if g.MaxActorCkptToKeep < 0 || g.LogValGenerations < 0 || g.EntropyCollapseSteps < 0 {
		return fmt.Errorf("trainer.max_actor_ckpt_to_keep %d, log_val_generations %d and entropy_collapse_steps %d must be ≥ 0",
			g.MaxActorCkptToKeep, g.LogValGenerations, g.EntropyCollapseSteps)
	}
	if math.IsNaN(g.EntropyCollapseThreshold) || g.EntropyCollapseThreshold < 0 {
		return fmt.Errorf("trainer.entropy_collapse_threshold %v must be a number ≥ 0", g.EntropyCollapseThreshold)
	}
	return nil
}

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
