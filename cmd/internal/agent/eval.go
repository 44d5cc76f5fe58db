package agent

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// EvalConfig is an evaluation's rollout (its limits, sampling and slots:
// EvalRollout's for a train run, cmd/eval's rollout section) and the
// context of each trajectory.
type EvalConfig struct {
	Rollout    rl.RolloutConfig
	MaxContext int
	// Policy, when set, is decoded with instead of a cache allocated for
	// the evaluation: the trainer's rollout policy, idle while it
	// evaluates, so that two caches never take memory at once (and its
	// step graphs serve both). Its model must be the evaluated one, its
	// cache at least MaxContext long; its slot count bounds the questions
	// decoded together.
	Policy *rl.ModelPolicy
}

// EvalRollout is a run's rollout settings as its evaluation uses them: one
// greedy sample per question, as verl validates, and every question that
// fits the context (max_prompt_tokens filters training prompts only); the
// other limits, the slots, the seed and the tool settings stay the run's.
func EvalRollout(cfg rl.RolloutConfig) rl.RolloutConfig {
	cfg.N, cfg.Sampling, cfg.MaxPromptTokens, cfg.Mode = 1, model.Greedy, math.MaxInt, "builtin"
	return cfg
}

// DefaultEvalRollout is cmd/eval's rollout: one greedy sample per question
// with the embedded train run's limits (64 tokens a turn, 640 a response)
// and eight tool calls at once; the library's other defaults.
func DefaultEvalRollout() rl.RolloutConfig {
	c := rl.DefaultRolloutConfig()
	c.N, c.Sampling = 1, model.Greedy
	c.MaxTurnTokens, c.MaxResponseTokens, c.ToolConcurrency = 64, 640, 8
	return c
}

// Result holds a model's scores on one set of questions.
type Result struct {
	N                              int
	EM, F1, CoverEM, Format, Score float64 // means
	Turns, ToolCalls               float64 // means
}

// Results are per data source ("synthetic/2-hop" and so on as well where
// samples state their hop count), plus "all".
type Results map[string]*Result

// Evaluate runs m with cfg.Rollout (greedy, one sample per question, as
// verl validates, unless it says otherwise) on samples with the setup's
// environment and returns the mean metrics per data source and over all.
func Evaluate(ctx context.Context, s *Setup, m *model.Model, samples []data.Sample, cfg EvalConfig) (Results, []*rl.Trajectory, error) {
	if len(samples) == 0 {
		return nil, nil, fmt.Errorf("agent: no samples to evaluate")
	}
	rc := cfg.Rollout
	rc.MaxPromptTokens = min(rc.MaxPromptTokens, cfg.MaxContext) // a longer prompt could not be decoded at all
	p := cfg.Policy
	if p != nil {
		if p.M != m || p.MaxLen() < cfg.MaxContext {
			return nil, nil, fmt.Errorf("agent: the evaluation's policy decodes another model or holds %d positions, fewer than its context of %d", p.MaxLen(), cfg.MaxContext)
		}
	} else {
		p = rl.NewModelPolicy(m, rc.SlotsFor(len(samples)), cfg.MaxContext)
		defer p.Cache.Free(m.Dev)
	}
	ro := &rl.Rollout{Policy: p, Tok: s.Tok, Env: s.Env, Stop: s.Stop, Cfg: &rc}
	trajs, err := ro.Run(ctx, 0, samples)
	if err != nil {
		return nil, nil, err
	}
	res := Results{}
	add := func(key string, t *rl.Trajectory) {
		r := res[key]
		if r == nil {
			r = &Result{}
			res[key] = r
		}
		r.N++
		r.EM += t.Outcome.Metrics["em"]
		r.F1 += t.Outcome.Metrics["f1"]
		r.CoverEM += t.Outcome.Metrics["cover_em"]
		r.Format += t.Outcome.Metrics["format"]
		r.Score += t.Outcome.Reward
		r.Turns += float64(t.Turns)
		r.ToolCalls += float64(t.ToolCalls)
	}
	for _, t := range trajs {
		add("all", t)
		src := t.Sample.DataSource
		if src == "" {
			src = "unknown"
		}
		add(src, t)
		// Questions that say how many hops they take (the synthetic
		// world's) are also scored per hop count: where a policy fails
		// shows there first.
		if h := t.Sample.Extra["hops"]; h != "" {
			add(src+"/"+h+"-hop", t)
		}
	}
	for _, r := range res {
		n := float64(r.N)
		r.EM, r.F1, r.CoverEM, r.Format, r.Score = r.EM/n, r.F1/n, r.CoverEM/n, r.Format/n, r.Score/n
		r.Turns, r.ToolCalls = r.Turns/n, r.ToolCalls/n
	}
	return res, trajs, nil
}

// Metrics flattens results under verl's validation names:
// val-core/{source}/em, val-aux/{source}/f1, ...
func (rs Results) Metrics() map[string]float64 {
	m := map[string]float64{}
	for src, r := range rs {
		m["val-core/"+src+"/em"] = r.EM
		m["val-aux/"+src+"/f1"] = r.F1
		m["val-aux/"+src+"/cover_em"] = r.CoverEM
		m["val-aux/"+src+"/format"] = r.Format
		m["val-aux/"+src+"/reward"] = r.Score
		m["val-aux/"+src+"/num_turns"] = r.Turns
		m["val-aux/"+src+"/tool_calls"] = r.ToolCalls
	}
	return m
}

// Sources lists the data sources, "all" last.
func (rs Results) Sources() []string {
	var out []string
	for k := range rs {
		if k != "all" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return append(out, "all")
}

// NaiveRAG is the paper's single-pass baseline: one retrieval with the
// question itself, the passages placed in the user turn, and one greedy
// answer turn with no tools offered.
func NaiveRAG(ctx context.Context, s *Setup, m *model.Model, samples []data.Sample, cfg EvalConfig) (Results, error) {
	queries := make([]string, len(samples))
	for i, smp := range samples {
		queries[i] = smp.Question
	}
	hits, err := s.Retriever.Retrieve(ctx, queries, s.EnvConfig.TopK)
	if err != nil {
		return nil, err
	}
	ec := s.EnvConfig.Config
	// One pass: a policy trained with the tool may still call it; the
	// episode then ends on that turn (with the "no such tool" observation)
	// instead of letting it try again.
	ec.MaxTurns = 1
	rag := make([]data.Sample, len(samples))
	for i, smp := range samples {
		content := "Question: " + smp.Question + "\n\nRetrieved passages:\n" + env.FormatHits(hits[i], env.SearchFormat(s.EnvConfig.Format))
		if ec.Instruction != "" {
			content += "\n" + ec.Instruction
		}
		rag[i] = smp
		rag[i].Prompt = []data.Message{{Role: "user", Content: content}}
	}
	noTools, err := env.New(ec)
	if err != nil {
		return nil, err
	}
	plain := *s
	plain.Env = noTools
	r, _, err := Evaluate(ctx, &plain, m, rag, cfg)
	return r, err
}
