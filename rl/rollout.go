package rl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// The multi-turn rollout. Each trajectory is a sequence of the scheduler
// (sched.go) and moves through its states,
//
//	queued → prefill → decode ⇄ tool → ... → finished
//
// Every step feeds one packed batch to the policy: whole prompts
// (prefill), single sampled tokens (decode), and "last sampled token +
// observation" chunks for trajectories whose tool call has returned. A
// trajectory waiting for its tool is not in the batch (continuous
// batching), so a slow tool idles nothing else. The rollout's handlers are
// sampled (a drawn token: decode, tool or finished), observe (the tool's
// answer: decode or finished) and finish.
//
// Token in, token out: the sampled ids are kept as sampled and never
// re-encoded; a turn is decoded to text only to hand it to the environment,
// and the environment's observation is encoded once and appended with
// action mask 0.

// Policy is what the rollout samples from: a language model whose keys and
// values live in numbered slots.
type Policy interface {
	Vocab() int
	Slots() int
	MaxLen() int // positions per slot
	Reset(slot int)
	// Fork makes slot dst continue from slot src's current state: samples
	// of one prompt share its prefill.
	Fork(dst, src int)
	// Feed appends each chunk's tokens to its slot and returns the logits
	// after each chunk's last token, [len(chunks)][Vocab()] flattened.
	Feed(chunks []model.Chunk) ([]float32, error)
}

// ModelPolicy adapts a Model and its KV cache to Policy.
type ModelPolicy struct {
	M     *model.Model
	Cache *model.KVCache
	dec   *model.Decoder // FeedSample's, made on first use (devicesample.go)
}

// NewModelPolicy allocates a cache of slots sequences of maxLen positions.
func NewModelPolicy(m *model.Model, slots, maxLen int) *ModelPolicy {
	return &ModelPolicy{M: m, Cache: m.NewKVCache(slots, maxLen)}
}

func (p *ModelPolicy) Vocab() int        { return p.M.Config.VocabSize }
func (p *ModelPolicy) Slots() int        { return p.Cache.Slots }
func (p *ModelPolicy) MaxLen() int       { return p.Cache.MaxLen }
func (p *ModelPolicy) Reset(slot int)    { p.Cache.Lens[slot] = 0 }
func (p *ModelPolicy) Fork(dst, src int) { p.Cache.CopySlot(p.M.Dev, dst, src) }
func (p *ModelPolicy) Feed(chunks []model.Chunk) ([]float32, error) {
	return p.M.Step(p.Cache, chunks)
}

// RolloutConfig sets the sampling and the length limits of a rollout.
type RolloutConfig struct {
	N                 int            `yaml:"n" help:"samples per prompt (group size)"`
	Slots             int            `yaml:"slots" help:"trajectories decoded together (KV cache slots; at least n)"`
	Sampling          model.Sampling `yaml:"sampling"`
	MaxTurnTokens     int            `yaml:"max_turn_tokens" help:"model tokens per turn (max_response_length_single_turn)"`
	MaxResponseTokens int            `yaml:"max_response_tokens" help:"tokens after the prompt, model and environment together (max_response_length)"`
	MaxPromptTokens   int            `yaml:"max_prompt_tokens" help:"longest prompt accepted (max_prompt_length)"`
	// PrefillTokens bounds the tokens of one forward step, and with them
	// the step's activations (the memory plan's "rollout step
	// activations"): prompts and observations are fed in pieces that share
	// what the step's decodes leave (sched.go). It matters where many slots
	// prefill at once, as in an evaluation, whose questions do not share
	// prefills. 0: every prompt is fed whole.
	PrefillTokens   int `yaml:"prefill_tokens" help:"most tokens one decode step feeds; longer prompts and observations are fed in pieces (0: no limit; at least slots)"`
	ToolConcurrency int `yaml:"tool_concurrency" help:"tool calls running at once"`
	// Deterministic waits for every running tool call before the next
	// forward pass, so which trajectories share a batch, and with it every
	// floating-point result, is the same on every run: a resumed run then
	// repeats an uninterrupted one bit for bit. It gives up continuous
	// batching, which matters only for slow tools.
	Deterministic bool   `yaml:"deterministic" help:"wait for running tool calls before each forward pass (reproducible batches)"`
	Seed          uint64 `yaml:"seed" help:"sampling seed: trajectory i of step s draws from its own stream, chosen by seed, s and i"`
	// Mode and ExternalAddr are the external rollout's (rl/serve): mode external serves the
	// OpenAI-compatible API from the live policy and trains on its episodes.
	Mode         string `yaml:"mode" help:"builtin (the rollout drives the environment) or external (an agent program calls the served API)"`
	ExternalAddr string `yaml:"external_addr" help:"external mode: listen address of the OpenAI-compatible API"`
	// ExternalTimeout bounds silence in external mode: an agent that
	// claimed an episode and died must not hold the step forever.
	ExternalTimeout time.Duration `yaml:"external_timeout" help:"external mode: a claimed episode silent this long (no request, no reward) is handed out again, and a batch no agent contacts (claim, request, reward) this long fails the step (0: wait forever)"`
	// DType is what the builtin rollout samples from: float32, the policy
	// itself; bfloat16, a bf16 copy of it that the trainer refreshes before
	// each rollout and discards after (its memory is the update's), whose
	// products run on the CPU's bf16 dot product where it has one
	// (AVX512_BF16), as verl's rollout engine samples in bf16. π_old stays
	// the float32 policy's (old log-probs are scored by it).
	DType string `yaml:"dtype" help:"float32 (sample from the policy) or bfloat16 (from a bf16 copy refreshed each step: half the weight bytes, bf16 dot products on CPUs with AVX512_BF16)"`
	// Trajectory and MergePrefix are step mode's (steps.go): each turn a
	// sample whose prompt the environment builds (env.context).
	Trajectory string `yaml:"trajectory" help:"whole (each trajectory one append-only sample) or step (each turn a sample of the context the environment built, env.context)"`
	// TruncationPenalty and TruncationLoss say what a trajectory that a
	// length budget cut (Finish.Truncated) gets: a reward added to its
	// outcome, and whether its tokens are trained (budget.go).
	TruncationPenalty float64 `yaml:"truncation_penalty" help:"added to the outcome reward of a trajectory a length budget ended (finish turn_limit, length or context); e.g. -1"`
	TruncationLoss    string  `yaml:"truncation_loss" help:"keep (train a truncated trajectory like any other) or mask (its tokens leave the loss; the estimator still counts its reward)"`
	// Verify is what a trajectory that fails the verifier does (verify.go).
	Verify      string `yaml:"verify" help:"trajectory verifier on every step: fail (a violation fails the step, naming trajectory, turn and token), drop (the trajectory is dropped and counted in verify/dropped) or off"`
	MergePrefix bool   `yaml:"merge_prefix" help:"step mode: train a turn whose prompt extends the previous turn's prompt and response in that turn's packed sequence (false: every turn a sequence of its own)"`
	// MaxStaleness and Threads are asynchronous training's (trainer.async,
	// async.go).
	MaxStaleness int `yaml:"max_staleness" help:"asynchronous training: most policy versions a trained token may be behind the weights it trains (0: the synchronous trainer's batches)"`
	Threads      int `yaml:"threads" help:"asynchronous training on the CPU: threads of the rollout's copy of the weights (0: every core, shared with the update)"`
}

// TrajectorySource is where a trainer step's trajectories come from: the
// built-in Rollout, or the external rollout (rl/serve's External). Run rolls out the samples of RL step step,
// whose number chooses the sampling streams (RolloutConfig.StepSeed).
type TrajectorySource interface {
	Run(ctx context.Context, step int, samples []data.Sample) ([]*Trajectory, error)
}

// DefaultRolloutConfig is Agent-R1's multi-hop script setting.
func DefaultRolloutConfig() RolloutConfig {
	return RolloutConfig{N: 5, Slots: 64, Seed: 1, Sampling: model.Sampling{Temperature: 1, TopP: 1, TopK: -1},
		MaxTurnTokens: 1024, MaxResponseTokens: 8192, MaxPromptTokens: 8192, ToolConcurrency: 16,
		Mode: "builtin", ExternalAddr: "127.0.0.1:8000", ExternalTimeout: 10 * time.Minute, DType: "float32",
		Trajectory: TrajectoryWhole, MergePrefix: true, Verify: VerifyFail, TruncationLoss: TruncationKeep}
}

// StepSeed is the seed of step's sampling streams: one per RL step, so that
// a resumed run draws what an uninterrupted one would.
func (c *RolloutConfig) StepSeed(step int) uint64 { return c.Seed*1_000_003 + uint64(step) }

// SlotsFor is how many slots a rollout of prompts prompts uses: Slots, but
// no more than it has trajectories.
func (c *RolloutConfig) SlotsFor(prompts int) int { return max(min(c.Slots, prompts*c.N), 1) }

// Validate reports settings outside their range.
func (c *RolloutConfig) Validate() error {
	if c.Slots < c.N {
		return fmt.Errorf("rl: rollout slots %d is smaller than n %d: the samples of one prompt are decoded together", c.Slots, c.N)
	}
	if c.N < 1 || c.MaxTurnTokens < 1 || c.MaxResponseTokens < 1 || c.MaxPromptTokens < 1 || c.ToolConcurrency < 1 {
		return fmt.Errorf("rl: rollout n %d, max_turn_tokens %d, max_response_tokens %d, max_prompt_tokens %d and tool_concurrency %d must all be ≥ 1",
			c.N, c.MaxTurnTokens, c.MaxResponseTokens, c.MaxPromptTokens, c.ToolConcurrency)
	}
	if c.MaxStaleness < 0 || c.Threads < 0 {
		return fmt.Errorf("rl: rollout max_staleness %d and threads %d must be ≥ 0", c.MaxStaleness, c.Threads)
	}
	if c.PrefillTokens != 0 && c.PrefillTokens < c.Slots {
		return fmt.Errorf("rl: rollout prefill_tokens %d is below slots %d: a step decodes a token for every slot and must still feed some prompt (0: no limit)", c.PrefillTokens, c.Slots)
	}
	if err := c.validateMode(); err != nil {
		return err
	}
	if err := c.validateTrajectory(); err != nil {
		return err
	}
	if err := c.validateBudgets(); err != nil {
		return err
	}
	switch c.DType {
	case "", "float32":
	case "bfloat16":
		if c.Mode == "external" {
			return fmt.Errorf("rl: rollout.dtype bfloat16 is for the builtin rollout; mode external serves the policy itself")
		}
	default:
		return fmt.Errorf("rl: rollout.dtype %q is neither float32 nor bfloat16", c.DType)
	}
	return c.Sampling.Validate()
}

// validateMode checks rollout.mode, rollout.external_addr and
// rollout.external_timeout.
func (c *RolloutConfig) validateMode() error {
	if c.ExternalTimeout < 0 {
		return fmt.Errorf("rl: rollout.external_timeout %v must be ≥ 0 (0: wait forever)", c.ExternalTimeout)
	}
	switch c.Mode {
	case "", "builtin":
	case "external":
		if c.ExternalAddr == "" {
			return fmt.Errorf("rl: rollout.mode external needs rollout.external_addr, the address to serve the API on")
		}

	default:
		return fmt.Errorf("rl: rollout.mode %q is neither builtin nor external", c.Mode)
	}
	return nil
}

// Finish says why a trajectory ended.
type Finish string

// Three are truncations, each the mark of one length budget (Truncated):
// turn_limit is max_turn_tokens, length max_response_tokens (the
// trajectory's tokens after its prompt), context the model's window
// (model.max_context). A tool response cut at env.max_tool_response_length
// does not end the trajectory; it is marked in the text and counted
// (Trajectory.TruncatedResponses).
const (
	FinishAnswer    Finish = "answer"     // a turn without a tool call
	FinishMaxTurns  Finish = "max_turns"  // the environment's turn limit
	FinishLength    Finish = "length"     // the trajectory's budget, max_response_tokens
	FinishContext   Finish = "context"    // the model's window: no room for the next token of the context
	FinishTurnLimit Finish = "turn_limit" // a turn hit max_turn_tokens and had no tool call
)

// Truncated says whether f is a length budget's cut rather than the
// episode's own end.
func (f Finish) Truncated() bool {
	return f == FinishLength || f == FinishContext || f == FinishTurnLimit
}

// Trajectory is one finished episode, token by token.
type Trajectory struct {
	Sample    data.Sample
	Group     int     // index of the prompt in the rollout; samples of one prompt share it
	Tokens    []int32 // prompt, then response
	PromptLen int
	Action    []bool    // sampled by the policy
	LogProb   []float32 // the sampler's log-probability of each action token (0 elsewhere)
	// ToolCallEnds holds the index of the last token of each turn that the
	// environment answered with an observation, and ProcessRewards the
	// environment's reward for it.
	ToolCallEnds   []int
	ProcessRewards []float64
	Turns          int // model turns
	ToolCalls      int // executed tool calls
	// TruncatedResponses counts the tool responses the environment cut at
	// its limit (env.max_tool_response_length), each marked in the text.
	TruncatedResponses int
	Finish             Finish
	Outcome            env.Outcome // outcome reward and the task's metrics
	// Mismatch is the sampler against the trainer, per model turn, once
	// the step has measured it (rollcorr_trainer.go).
	Mismatch []TurnMismatch
	// Versions holds, in asynchronous training, the policy version (RL
	// steps done) of the weights that sampled each action token, in the
	// order of the action tokens: a trajectory that spans a refresh of the
	// rollout's weights goes on under the new ones (async.go). Nil
	// otherwise.
	Versions []int32
	// Steps holds, in step mode, each turn as the sample it is trained as:
	// the prompt the environment built and the policy's response
	// (steps.go). Tokens is then the transcript of every turn in order,
	// which the outcome is scored on. Nil for a whole trajectory.
	Steps []TurnSample
}

// ResponseLen is the number of tokens after the prompt.
func (t *Trajectory) ResponseLen() int { return len(t.Tokens) - t.PromptLen }

// Rollout samples N trajectories for each sample with the environment env.
// Cfg points at the one copy of the settings (a Trainer's Cfg.Rollout).
type Rollout struct {
	Cfg    *RolloutConfig
	Policy Policy
	Tok    *tokenizer.Tokenizer
	Env    env.Environment
	Stop   []int32 // token ids that end a model turn (e.g. </tool_call>, <|im_end|>)
	// StreamBase is the sampling stream of the first trajectory (a
	// data-parallel rank's offset in the global batch; 0 in one process).
	StreamBase uint64
}

// trajState is one trajectory in the scheduler.
type trajState struct {
	seq
	t    *Trajectory
	ep   env.Episode
	turn []int      // ids of the current model turn
	text []byte     // the current turn decoded so far, with stop strings only (stopstrings.go)
	cut  bool       // the current turn ended at max_turn_tokens, not a stop token
	step *stepState // step mode's context (steps.go); nil for a whole trajectory
}

type toolResult struct {
	s   *trajState
	res env.StepResult
}

// Run rolls out every sample N times for RL step step (its sampling streams
// are Cfg.StepSeed(step)'s) and returns the trajectories grouped by sample,
// in order: trajectory g·N+i is sample i of prompt g.
func (r *Rollout) Run(ctx context.Context, step int, samples []data.Sample) ([]*Trajectory, error) {
	if r.Cfg == nil {
		return nil, errors.New("rl: Rollout.Cfg is nil")
	}
	if err := r.Cfg.Validate(); err != nil {
		return nil, err
	}
	n := r.Cfg.N
	if r.Policy.Slots() < n {
		return nil, fmt.Errorf("rl: the policy has %d slots, fewer than the %d samples of one prompt", r.Policy.Slots(), n)
	}
	states := make([]*trajState, 0, len(samples)*n)
	for g, smp := range samples {
		group, err := r.newGroup(step, g, smp)
		if err != nil {
			return nil, err
		}
		states = append(states, group...)
	}
	return r.run(ctx, states)
}

// newGroup makes the N trajectories of sample smp, prompt g of RL step
// step's batch: trajectory i draws from stream StreamBase+g·N+i of the
// step's seed, so that where a trajectory runs (alone, in a batch, in an
// asynchronous stream) does not change what it may draw. The first is the
// leader whose prefill the others share.
func (r *Rollout) newGroup(step, g int, smp data.Sample) ([]*trajState, error) {
	n := r.Cfg.N
	states := make([]*trajState, 0, n)
	var leader *seq
	var prompt []int32
	for i := 0; i < n; i++ {
		ep := r.Env.Episode()
		msgs, tools := ep.Reset(smp)
		if i == 0 {
			var err error
			if prompt, err = r.encodePrompt(msgs, tools); err != nil {
				return nil, fmt.Errorf("rl: sample %s: %w", smp.ID, err)
			}
			if len(prompt) > r.Cfg.MaxPromptTokens || len(prompt) >= r.Policy.MaxLen() {
				return nil, fmt.Errorf("rl: sample %s: prompt of %d tokens exceeds max_prompt_tokens %d or the context of %d",
					smp.ID, len(prompt), r.Cfg.MaxPromptTokens, r.Policy.MaxLen())
			}
		}
		idx := uint64(g*n + i)
		s := &trajState{
			t: &Trajectory{Sample: smp, Group: g, Tokens: slices.Clone(prompt), PromptLen: len(prompt),
				Action: make([]bool, len(prompt)), LogProb: make([]float32, len(prompt))},
			ep: ep,
		}
		if r.Cfg.Trajectory == TrajectoryStep {
			s.step = r.newStepState(ep, prompt)
		}
		s.rng = rand.New(rand.NewPCG(r.Cfg.StepSeed(step), r.StreamBase+idx))
		s.sampling = r.Cfg.Sampling
		if i == 0 {
			leader = &s.seq
			s.pending = slices.Clone(prompt)
		} else {
			s.leader = leader
		}
		states = append(states, s)
	}
	return states, nil
}

// CheckPrompts renders every sample's prompt as Run would and reports, in
// one error, how many are longer than Cfg.MaxPromptTokens, naming the first
// few by index and id: a run learns this when its data is loaded, not at the
// RL step that draws the long prompt. It needs Cfg, Tok and Env, no policy.
func (r *Rollout) CheckPrompts(samples []data.Sample) error {
	long, lens, err := r.longPrompts(samples)
	if err != nil || len(long) == 0 {
		return err
	}
	const named = 5
	var bad []string
	for k, i := range long[:min(named, len(long))] {
		bad = append(bad, fmt.Sprintf("#%d %s (%d tokens)", i, samples[i].ID, lens[k]))
	}
	more := ""
	if len(long) > named {
		more = fmt.Sprintf(" and %d more", len(long)-named)
	}
	return fmt.Errorf("rollout.max_prompt_tokens %d: %d of %d prompts are longer: %s%s",
		r.Cfg.MaxPromptTokens, len(long), len(samples), strings.Join(bad, ", "), more)
}

// longPrompts renders every sample's prompt and returns the indices of
// those longer than Cfg.MaxPromptTokens, with their lengths.
func (r *Rollout) longPrompts(samples []data.Sample) (long, lens []int, err error) {
	for i, smp := range samples {
		msgs, tools := r.Env.Episode().Reset(smp)
		ids, err := r.encodePrompt(msgs, tools)
		if err != nil {
			return nil, nil, fmt.Errorf("rl: sample %d (%s): %w", i, smp.ID, err)
		}
		if len(ids) > r.Cfg.MaxPromptTokens {
			long, lens = append(long, i), append(lens, len(ids))
		}
	}
	return long, lens, nil
}

// encodePrompt renders the episode's first messages with the chat template
// and the generation prompt.
func (r *Rollout) encodePrompt(msgs []data.Message, tools []json.RawMessage) ([]int32, error) {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	ids, err := r.Tok.EncodeChat(tm, tools, true)
	if err != nil {
		return nil, err
	}
	return toInt32(ids), nil
}
