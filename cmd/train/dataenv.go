package main

import (
	"fmt"
	"io"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/rl"
)

// checkData runs the load-time checks on the assembled datasets, before
// the warm start (agent.Build has refused prompts written for another
// tool protocol than env.style): the records skip mode dropped are
// printed, and prompts longer than rollout.max_prompt_tokens are refused (or, in skip
// mode, dropped and counted). It returns the number of records skipped in
// all, which every step logs as data/skipped_records.
func checkData(cfg *Config, s *agent.Setup, out io.Writer) (int, error) {
	opt, err := cfg.Data.LoadOptions()
	if err != nil {
		return 0, fmt.Errorf("data: %w", err)
	}
	if msg := data.SkipSummary(s.DataReports, 5); msg != "" {
		fmt.Fprintln(out, msg)
	}
	skipped := data.SkippedCount(s.DataReports)
	if cfg.Env.Process.NeedsEvidence() {
		for _, smp := range s.Train {
			if !env.HasEvidence(smp) {
				return 0, fmt.Errorf("env.process.name=evidence needs each training question's evidence chain, which the synthetic world's questions carry and data.train_files do not: question %q has none", smp.ID)
			}
		}
	}
	// Too long a prompt is found now, before the warm start, not at the RL
	// step that happens to draw it.
	ro := &rl.Rollout{Cfg: &cfg.RL.Rollout, Tok: s.Tok, Env: s.Env}
	if !opt.SkipMalformed {
		if err := ro.CheckPrompts(s.Train); err != nil {
			return 0, fmt.Errorf("data.train_files: %w", err)
		}
		return skipped, nil
	}
	kept, dropped, err := ro.DropLongPrompts(s.Train)
	if err != nil {
		return 0, fmt.Errorf("data.train_files: %w", err)
	}
	if dropped > 0 {
		fmt.Fprintf(out, "data: skipped %d of %d training prompts longer than rollout.max_prompt_tokens %d (data.on_bad_record=skip)\n",
			dropped, len(s.Train), cfg.RL.Rollout.MaxPromptTokens)
		if len(kept) == 0 {
			return 0, fmt.Errorf("data.train_files: every prompt is longer than rollout.max_prompt_tokens %d", cfg.RL.Rollout.MaxPromptTokens)
		}
	}
	s.Train = kept
	return skipped + dropped, nil
}
