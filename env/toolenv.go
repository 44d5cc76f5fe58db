package env

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"encoding/json"

	"github.com/r1go/r1go/data"
)

// Style selects how observations are built.
type Style string

const (
	// StyleAgentR1 is Agent-R1's NousToolEnv: tool results inside one user
	// turn, the next assistant turn pre-filled.
	StyleAgentR1 Style = "agent-r1"
	// StyleVerl is verl's tool agent loop: one message of role "tool" per
	// result (Qwen's template renders a run of them as one user turn, so the
	// text is the same shape), no pre-fill.
	StyleVerl Style = "verl"
)

// Config configures an Env; DefaultConfig gives Agent-R1's behaviour. It is
// the env section of a run's YAML file as it is (the train and eval
// commands embed it), so each key is declared here once, with its check in
// Validate.
type Config struct {
	Style Style `yaml:"style" help:"agent-r1 (tool results in a user turn, <think> pre-fill), verl (role tool) or search-r1 (<search> tags, <information> in the assistant turn)"`
	// MaxParallelCalls is how many tool calls of one turn run; 1 means the
	// first call only (Agent-R1 and verl's default).
	MaxParallelCalls int `yaml:"max_parallel_calls" help:"tool calls of one turn that run (1: the first only)"`
	// MaxResponseChars cuts each tool response to this many characters
	// (code points); 0 means no limit.
	MaxResponseChars int          `yaml:"max_tool_response_length" help:"characters kept of each tool response (0: all)"`
	TruncateSide     TruncateSide `yaml:"truncate_side" help:"how a long tool response is cut: agent-r1 (head and ...), left, right or middle"`
	Markup           Markup       `yaml:"-"`
	// Prefill is written at the start of the next assistant turn after an
	// observation, e.g. "<think>\n"; it is environment text (mask 0).
	Prefill string `yaml:"prefill" help:"text opening each assistant turn after an observation"`
	// MaxTurns ends the episode after this many tool turns: the observation
	// is still returned, with Done set. 0 means no limit.
	MaxTurns int `yaml:"max_turns" help:"tool turns per episode (0: no limit)"`
	// CallTimeout bounds one tool call; 0 means only the caller's context.
	CallTimeout time.Duration `yaml:"call_timeout" help:"bound on one tool call (0: none)"`
	// RetrieverTimeout bounds one request to an HTTP retriever, all attempts
	// and back-off included; 0 leaves the client's default. RetrieverRetries
	// is how many times a failed attempt is repeated within it. See
	// RetrieverClientConfig.
	RetrieverTimeout time.Duration `yaml:"retriever_timeout" help:"bound on one retriever request, retries included (0: the client's 30 s)"`
	RetrieverRetries int           `yaml:"retriever_retries" help:"attempts after a failed retriever request"`
	// RetrieverWait is how long a command waits, before any work, for an
	// HTTP retriever to answer its probe (WaitReady); 0 probes once.
	RetrieverWait time.Duration `yaml:"retriever_wait" help:"wait this long for env.retriever_url to answer its start-up probe, probing with back-off (0: probe once, fail at once)"`
	// SystemPrompt, when not empty, becomes a system message before the
	// question (samples that carry their own prompt keep it).
	SystemPrompt string `yaml:"system_prompt" help:"system message before the question (empty: none)"`
	// Instruction follows the question in the user message, after a newline.
	Instruction string `yaml:"instruction" help:"text after the question in the user turn"`
	// Reward names the outcome reward (see RegisterReward).
	Reward string `yaml:"reward" help:"outcome reward: agent-r1, paper, em, f1, cover-em, or a registered reward"`
	// Process names the per-tool-call process reward (see ProcessNames);
	// the trainer adds it at each tool call's end when
	// algorithm.use_process_rewards is on.
	Process ProcessConfig `yaml:"process"`
	// Context is the context policy of step mode (context.go).
	Context ContextConfig `yaml:",inline"`
}

// Validate reports a setting New would refuse, or a negative limit, naming
// its key.
func (c *Config) Validate() error {
	if c.Style != StyleAgentR1 && c.Style != StyleVerl && c.Style != StyleSearchR1 {
		return fmt.Errorf("style %q is not %s, %s or %s", c.Style, StyleAgentR1, StyleVerl, StyleSearchR1)
	}
	if c.MaxParallelCalls < 1 {
		return fmt.Errorf("max_parallel_calls %d must be ≥ 1", c.MaxParallelCalls)
	}
	if c.MaxResponseChars < 0 {
		return fmt.Errorf("max_tool_response_length %d must be ≥ 0 (0: no limit)", c.MaxResponseChars)
	}
	switch c.TruncateSide {
	case TruncateAgentR1, TruncateLeft, TruncateRight, TruncateMiddle:
	default:
		return fmt.Errorf("truncate_side %q is not agent-r1, left, right or middle", c.TruncateSide)
	}
	if c.MaxTurns < 0 {
		return fmt.Errorf("max_turns %d must be ≥ 0 (0: no limit)", c.MaxTurns)
	}
	if c.CallTimeout < 0 {
		return fmt.Errorf("call_timeout %v must be ≥ 0", c.CallTimeout)
	}
	if c.RetrieverTimeout < 0 || c.RetrieverRetries < 0 {
		return fmt.Errorf("retriever_timeout %v and retriever_retries %d must be ≥ 0", c.RetrieverTimeout, c.RetrieverRetries)
	}
	if c.RetrieverWait < 0 {
		return fmt.Errorf("retriever_wait %v must be ≥ 0 (0: probe once)", c.RetrieverWait)
	}
	if _, err := Reward(c.Reward); err != nil {
		return fmt.Errorf("reward: %w", err)
	}
	if _, err := processReward(c.Process); err != nil {
		return fmt.Errorf("process.name: %w", err)
	}
	return c.Context.Validate()
}

// AgentR1Instruction is the instruction Agent-R1's multi-hop preprocessing
// appends to every question.
const AgentR1Instruction = "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in <answer> </answer> tags."

// DefaultConfig is Agent-R1 legacy's multi-hop QA setting: first call only,
// responses cut to 2048 characters with "...", "<think>\n" pre-filled,
// at most 5 tool turns, the format+answer reward, no process reward.
func DefaultConfig() Config {
	return Config{
		Style:            StyleAgentR1,
		MaxParallelCalls: 1,
		MaxResponseChars: 2048,
		TruncateSide:     TruncateAgentR1,
		Markup:           QwenMarkup(),
		Prefill:          "<think>\n",
		MaxTurns:         5,
		CallTimeout:      60 * time.Second,
		RetrieverTimeout: 30 * time.Second,
		RetrieverRetries: 3,
		Instruction:      AgentR1Instruction,
		Reward:           "agent-r1",
		Process:          ProcessConfig{Name: "none"},
		Context:          DefaultContextConfig(),
	}
}

// VerlConfig is verl's multi-turn default: role "tool", 256 characters cut
// in the middle, no pre-fill.
func VerlConfig() Config {
	c := DefaultConfig()
	c.Style = StyleVerl
	c.MaxResponseChars = 256
	c.TruncateSide = TruncateMiddle
	c.Prefill = ""
	return c
}

// Env holds what all episodes share: the config, the validated tools and
// the scorer. It is safe for concurrent use; each episode is its own
// ToolEnv from NewEpisode.
type Env struct {
	cfg     Config
	tools   *Toolset
	scorer  *Scorer
	process processFunc
	stats   ToolStats // every call of every episode (toolstats.go)
}

// New validates the config and the tools.
func New(cfg Config, tools ...Tool) (*Env, error) {
	if cfg.Style == StyleSearchR1 {
		return nil, errors.New("env: style search-r1 parses <search> tags, not tool calls: build it with NewSearchR1")
	}
	if cfg.Style != StyleAgentR1 && cfg.Style != StyleVerl {
		return nil, fmt.Errorf("env: unknown style %q (want %s or %s)", cfg.Style, StyleAgentR1, StyleVerl)
	}
	if cfg.MaxParallelCalls < 1 {
		return nil, fmt.Errorf("env: MaxParallelCalls %d < 1", cfg.MaxParallelCalls)
	}
	if cfg.RetrieverTimeout < 0 || cfg.RetrieverRetries < 0 {
		return nil, fmt.Errorf("env: env.retriever_timeout %v and env.retriever_retries %d must not be negative", cfg.RetrieverTimeout, cfg.RetrieverRetries)
	}
	switch cfg.TruncateSide {
	case TruncateAgentR1, TruncateLeft, TruncateRight, TruncateMiddle:
	default:
		return nil, fmt.Errorf("env: unknown truncate side %q", cfg.TruncateSide)
	}
	if cfg.Markup.AssistantStart == "" || cfg.Markup.TurnEnd == "" || cfg.Markup.CallStart == "" || cfg.Markup.CallEnd == "" {
		return nil, errors.New("env: markup needs AssistantStart, TurnEnd, CallStart and CallEnd")
	}
	ts, err := NewToolset(tools...)
	if err != nil {
		return nil, err
	}
	scorer, err := NewScorer(cfg.Reward, cfg.Markup)
	if err != nil {
		return nil, err
	}
	pf, err := processReward(cfg.Process)
	if err != nil {
		return nil, err
	}
	return &Env{cfg: cfg, tools: ts, scorer: scorer, process: pf}, nil
}

// Config returns the env's config.
func (e *Env) Config() Config { return e.cfg }

// ToolStats counts the outcome of every tool call its episodes make; the
// trainer takes them once per step.
func (e *Env) ToolStats() *ToolStats { return &e.stats }

// Tools returns the validated tool set.
func (e *Env) Tools() *Toolset { return e.tools }

// Scorer returns the outcome scorer.
func (e *Env) Scorer() *Scorer { return e.scorer }

// NewEpisode starts a fresh per-trajectory state machine.
func (e *Env) NewEpisode() *ToolEnv { return &ToolEnv{env: e} }

// ToolEnv is one episode: Reset, then Step once per model turn until Done.
// It is not safe for concurrent use; run one per trajectory.
type ToolEnv struct {
	env    *Env
	sample data.Sample
	turns  int
	done   bool
	memory *Memory // what this episode's tools share (the last search's passages)
	// found holds the evidence passages (Sample.Gold's) a search of this
	// episode has returned: the evidence process reward credits each once.
	found map[string]bool
}

// CallInfo describes one executed (or rejected) tool call.
type CallInfo struct {
	Tool      string // empty when the call had no name
	Success   bool
	ErrorKind ErrorKind
	Error     string   // the error text, for logs
	Err       error    `json:"-"` // the tool's error, for ClassifyCall; nil when it returned none
	Reward    *float64 // the tool's own process reward, if any
	Passages  []string // corpus ids of the passages a retrieval returned
	Elapsed   time.Duration
}

// StepInfo describes a step.
type StepInfo struct {
	Turn      int        // 1-based number of this model turn
	Calls     []CallInfo // executed calls, in order
	Ignored   int        // calls beyond MaxParallelCalls
	Tool      string     // the first call's tool (convenience for logs)
	Success   bool       // every executed call succeeded
	ErrorKind ErrorKind  // the first call's error kind
	MaxTurns  bool       // the episode ended because MaxTurns was reached
	Truncated int        // tool responses cut at max_tool_response_length (each marked in the text)
}

// StepResult is the env's answer to one model turn.
type StepResult struct {
	// Observation is the text to append after the model's tokens: the turn
	// closed if the model did not close it, the tool responses as the next
	// turn, and a new assistant turn with the pre-fill. Empty when Done
	// because the turn had no tool call.
	Observation string
	// Messages holds the same tool results as chat messages (role "user"
	// for Agent-R1, one "tool" message per call for verl), for callers that
	// render with a chat template instead.
	Messages []data.Message
	// Elided is Observation with each tool result replaced by
	// ElidedMarker, the markup kept: what the drop_observations context
	// policy shows of an old turn (context.go). Empty with Observation.
	Elided string
	Reward float64 // process reward for this step
	Done   bool
	Info   StepInfo
}

// Reset starts the episode for a sample and returns the initial chat
// messages and the tool schemas in OpenAI form.
func (t *ToolEnv) Reset(s data.Sample) ([]data.Message, []json.RawMessage) {
	t.sample, t.turns, t.done, t.memory, t.found = s, 0, false, nil, nil
	cfg := t.env.cfg
	var msgs []data.Message
	if len(s.Prompt) > 0 {
		msgs = append(msgs, s.Prompt...)
	} else {
		if cfg.SystemPrompt != "" {
			msgs = append(msgs, data.Message{Role: "system", Content: cfg.SystemPrompt})
		}
		content := "Question: " + s.Question
		if cfg.Instruction != "" {
			content += "\n" + cfg.Instruction
		}
		msgs = append(msgs, data.Message{Role: "user", Content: content})
	}
	return msgs, t.env.tools.Schemas()
}

// Done says whether the episode has ended.
func (t *ToolEnv) Done() bool { return t.done }

// Step runs the model's turn: the first MaxParallelCalls tool calls are
// validated and executed, errors become "Error: ..." observations. A turn
// without any tool call ends the episode.
func (t *ToolEnv) Step(ctx context.Context, turn string) StepResult {
	cfg := t.env.cfg
	if t.done {
		return StepResult{Done: true, Info: StepInfo{Turn: t.turns}}
	}
	t.turns++
	info := StepInfo{Turn: t.turns, Success: true}
	calls := cfg.Markup.ParseToolCalls(turn)
	if len(calls) == 0 {
		t.done = true
		return StepResult{Done: true, Info: info}
	}
	if len(calls) > cfg.MaxParallelCalls {
		info.Ignored = len(calls) - cfg.MaxParallelCalls
		calls = calls[:cfg.MaxParallelCalls]
	}
	contents := make([]string, len(calls))
	info.Calls = make([]CallInfo, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			contents[i], info.Calls[i] = t.run(ctx, calls[i])
		}(i)
	}
	wg.Wait()
	t.env.stats.AddAll(info.Calls)
	for i, c := range info.Calls {
		if !c.Success {
			info.Success = false
		}
		if cut := Truncate(contents[i], cfg.MaxResponseChars, cfg.TruncateSide); cut != contents[i] {
			contents[i] = cut
			info.Truncated++
		}
	}
	info.Tool, info.ErrorKind = info.Calls[0].Tool, info.Calls[0].ErrorKind
	res := StepResult{Info: info, Reward: t.env.process(t, info.Calls)}
	res.Observation, res.Messages = t.observation(turn, contents)
	elided := make([]string, len(contents))
	for i := range elided {
		elided[i] = ElidedMarker
	}
	res.Elided, _ = t.observation(turn, elided)
	if cfg.MaxTurns > 0 && t.turns >= cfg.MaxTurns {
		t.done, res.Done, res.Info.MaxTurns = true, true, true
	}
	return res
}

// newEvidence counts the passages of the episode's evidence chain that
// calls returned and no earlier call of the episode had, and records them;
// useless counts the successful retrieval calls that found none.
func (t *ToolEnv) newEvidence(calls []CallInfo) (found, useless int) {
	if t.sample.Gold == nil {
		return 0, 0
	}
	for _, c := range calls {
		if !c.Success || c.Passages == nil {
			continue
		}
		before := found
		for _, id := range c.Passages {
			if t.found[id] || !t.onChain(id) {
				continue
			}
			if t.found == nil {
				t.found = map[string]bool{}
			}
			t.found[id] = true
			found++
		}
		if found == before {
			useless++
		}
	}
	return found, useless
}

// onChain says whether passage id is evidence of one of the sample's gold
// steps (a chain is 2 to 4 steps: a scan is cheaper than a set).
func (t *ToolEnv) onChain(id string) bool {
	for _, st := range t.sample.Gold.Steps {
		if st.Evidence == id {
			return true
		}
	}
	return false
}

// run executes one parsed call and never panics.
func (t *ToolEnv) run(ctx context.Context, c ToolCall) (content string, ci CallInfo) {
	ci.Tool = c.Name
	fail := func(kind ErrorKind, detail string) (string, CallInfo) {
		ci.ErrorKind, ci.Error = kind, detail
		if msg, ok := agentR1Errors[kind]; ok {
			return msg, ci
		}
		return "Error: " + detail, ci
	}
	if c.Err != ErrNone {
		return fail(c.Err, string(c.Err))
	}
	tools := t.env.tools
	tool, ok := tools.Lookup(c.Name)
	if !ok {
		return fail(ErrUnknownTool, "unknown tool "+c.Name)
	}
	if err := tools.ValidateArgs(c.Name, c.Arguments); err != nil {
		return fail(ErrInvalidArguments, err.Error())
	}
	if d := t.env.cfg.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if t.memory == nil {
		t.memory = &Memory{}
	}
	ctx = WithMemory(ctx, t.memory)
	start := time.Now()
	res, err := safeCall(ctx, tool, c.Arguments)
	ci.Elapsed = time.Since(start)
	if err != nil {
		ci.Err = err
		var pe panicError
		switch {
		case errors.As(err, &pe):
			return fail(ErrPanic, err.Error())
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
			return fail(ErrTimeout, fmt.Sprintf("tool %s: %v", c.Name, err))
		default:
			return fail(ErrTool, err.Error())
		}
	}
	ci.Success, ci.Reward, ci.Passages = res.Success, res.Reward, res.Passages
	return res.Content, ci
}

type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("env: tool panicked: %v", p.v) }

func safeCall(ctx context.Context, tool Tool, args json.RawMessage) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	return tool.Call(ctx, args)
}

// observation builds the text and the messages for the tool results.
func (t *ToolEnv) observation(turn string, contents []string) (string, []data.Message) {
	cfg := t.env.cfg
	m := cfg.Markup
	var b strings.Builder
	if !strings.HasSuffix(turn, m.TurnEnd) {
		b.WriteString(m.TurnEnd)
	}
	b.WriteString("\n")
	b.WriteString(m.UserStart)
	var msgs []data.Message
	var user strings.Builder
	for i, c := range contents {
		if i > 0 {
			user.WriteString("\n")
		}
		user.WriteString(m.ResponseStart + "\n" + c + "\n" + m.ResponseEnd)
		if cfg.Style == StyleVerl {
			msgs = append(msgs, data.Message{Role: "tool", Content: c})
		}
	}
	if cfg.Style == StyleAgentR1 {
		msgs = []data.Message{{Role: "user", Content: user.String()}}
	}
	b.WriteString(user.String())
	b.WriteString(m.TurnEnd)
	b.WriteString("\n")
	b.WriteString(m.AssistantStart)
	b.WriteString(cfg.Prefill)
	return b.String(), msgs
}

// Score computes the outcome reward and answer metrics of this episode's
// sample over the whole trajectory text.
func (t *ToolEnv) Score(text string) Scores { return t.env.scorer.Score(t.sample, text) }
