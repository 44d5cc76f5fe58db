package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

// External is the rollout of rollout.mode=external: the agent is a program
// of its own, in any language, that calls the OpenAI-compatible endpoint
// (rl/serve) served from the live policy, and the trainer learns from what
// that endpoint generated.
//
// Each Run publishes one batch: N episodes for each prompt, all of the same
// task id, so that they form one GRPO group. An agent claims an episode
// (POST /v1/episodes/claim), sends its chat requests with the episode id
// in the X-R1go-Episode header (or the `user` field), and reports the
// reward (POST /v1/episodes/{id}/reward). Run returns when every episode of
// the batch has its reward; the engine is then paused until the next Run,
// so the update changes the weights with nothing decoding, and requests of
// an episode of a finished batch are refused (409), never served by a
// newer policy than the one that started the episode.
//
// The trajectory is assembled from the exact ids the engine generated. A
// later request's messages must extend the earlier conversation; only the
// text the chat template adds after the model's own turn (the turn's end
// and the new messages) is encoded, the model's turn is never re-encoded,
// and only generated ids are actions. With the agent-r1 environment style
// this is the same token layout the built-in rollout produces.
type External struct {
	Cfg    *rl.RolloutConfig // read at each Run
	Tok    *tokenizer.Tokenizer
	Env    env.Environment // the tasks' messages and tools, and the outcome
	Engine *rl.Engine
	Stop   []int32 // ids that end a model turn, as for the built-in rollout

	mu       sync.Mutex
	step     int    // batches published
	seed     uint64 // the open batch's RL step's seed (RolloutConfig.StepSeed)
	open     bool
	closed   bool
	episodes map[string]*extEpisode
	unclaim  []*extEpisode
	left     int
	complete chan struct{}
	paused   bool
	active   time.Time // the open batch's last agent contact: a claim (even of nothing), request or reward
	// Released counts the episodes handed out again after
	// rollout.external_timeout of silence; Log, when set, is told of each.
	Released int
	Log      func(string)
}

// NewExternal tracks episodes for an engine over the trainer's policy. The
// engine is paused until the first Run, so nothing decodes while the
// trainer warms up or evaluates.
func NewExternal(cfg *rl.RolloutConfig, tok *tokenizer.Tokenizer, e env.Environment, eng *rl.Engine, stop []int32) *External {
	eng.Pause()
	return &External{Cfg: cfg, Tok: tok, Env: e, Engine: eng, Stop: stop, paused: true, episodes: map[string]*extEpisode{}}
}

// ExternalTurn is how one request of an episode is to be generated.
type ExternalTurn struct {
	Prompt    []int32
	Sampling  model.Sampling
	Seed      uint64
	MaxTokens int
	Stop      []int32
	obs       []int32 // ids appended before the prompt's generation: the previous turn's end and the new messages
	msgs      []tokenizer.Message
}

type extEpisode struct {
	id      string
	step    int
	index   int // trajectory index in the batch
	task    string
	ep      env.Episode
	msgs    []tokenizer.Message
	tools   []json.RawMessage
	t       *rl.Trajectory
	turns   int
	claimed bool
	seen    time.Time // last claim, request or reward
	busy    bool
	done    bool
	cut     bool // the last turn ended without a stop id
}

// ExternalError is a refused episode request and its HTTP status.
type ExternalError struct {
	Status int
	Msg    string
}

func (e *ExternalError) Error() string   { return e.Msg }
func (e *ExternalError) HTTPStatus() int { return e.Status }

func refuse(status int, format string, args ...any) error {
	return &ExternalError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// Run publishes one batch of len(samples)·N episodes and waits for all
// their rewards. Trajectory g·N+i is episode i of prompt g, as for Rollout.
func (x *External) Run(ctx context.Context, step int, samples []data.Sample) ([]*rl.Trajectory, error) {
	if err := x.Cfg.Validate(); err != nil {
		return nil, err
	}
	x.mu.Lock()
	if x.paused {
		x.Engine.Resume()
		x.paused = false
	}
	x.step++
	x.seed = x.Cfg.StepSeed(step)
	n := x.Cfg.N
	batch := make([]*extEpisode, 0, len(samples)*n)
	for g, smp := range samples {
		task := smp.ID
		if task == "" {
			task = fmt.Sprintf("task-%d-%d", x.step, g)
		}
		for i := 0; i < n; i++ {
			e := &extEpisode{id: fmt.Sprintf("ep-%d-%d-%d", x.step, g, i), step: x.step, index: len(batch), task: task}
			x.start(e, smp, g)
			batch = append(batch, e)
			x.episodes[e.id] = e
		}
	}
	x.unclaim = slices.Clone(batch)
	x.left = len(batch)
	x.open = true
	x.active = time.Now()
	done := make(chan struct{})
	x.complete = done
	if x.left == 0 {
		close(done)
	}
	x.mu.Unlock()

	if err := x.wait(ctx, done, batch); err != nil {
		x.mu.Lock()
		x.open = false
		x.mu.Unlock()
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open = false
	x.unclaim = nil
	x.Engine.Pause()
	x.paused = true
	out := make([]*rl.Trajectory, len(batch))
	for i, e := range batch {
		out[i] = e.t
		delete(x.episodes, e.id)
	}
	return out, nil
}

// start (re)opens episode e on sample smp of group g: a fresh environment
// episode and an empty trajectory.
func (x *External) start(e *extEpisode, smp data.Sample, g int) {
	e.ep = x.Env.Episode()
	e.t = &rl.Trajectory{Sample: smp, Group: g}
	e.msgs, e.turns, e.cut, e.claimed = nil, 0, false, false
	msgs, tools := e.ep.Reset(smp)
	for _, m := range msgs {
		e.msgs = append(e.msgs, tokenizer.Message{Role: m.Role, Content: m.Content})
	}
	e.tools = tools
}

// wait returns when the batch is complete, or with the context's error, or
// with an error when no agent made contact for rollout.external_timeout. While
// it waits, a claimed episode silent for that long (its agent died or
// forgot it) is started afresh under a new id and handed out again: its
// group stays whole, and the old id's requests are refused as stale.
func (x *External) wait(ctx context.Context, done chan struct{}, batch []*extEpisode) error {
	limit := x.Cfg.ExternalTimeout
	var tick <-chan time.Time
	if limit > 0 {
		t := time.NewTicker(min(max(limit/8, time.Millisecond), time.Second))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick:
			if err := x.watch(now, limit, batch); err != nil {
				return err
			}
		}
	}
}

// watch is one look of wait's watchdog at the open batch.
func (x *External) watch(now time.Time, limit time.Duration, batch []*extEpisode) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var missing []string
	busy := false // a request in flight is progress, however long it decodes
	for _, e := range batch {
		if e.done {
			continue
		}
		missing = append(missing, e.id)
		busy = busy || e.busy
		if !e.claimed || e.busy || now.Sub(e.seen) < limit {
			continue
		}
		old, idle := e.id, now.Sub(e.seen)
		delete(x.episodes, old)
		x.Released++
		e.id = fmt.Sprintf("%s-r%d", strings.SplitN(old, "-r", 2)[0], x.Released)
		x.start(e, e.t.Sample, e.t.Group)
		x.episodes[e.id] = e
		x.unclaim = append(x.unclaim, e)
		if x.Log != nil {
			x.Log(fmt.Sprintf("external rollouts: episode %s claimed but silent for %s (rollout.external_timeout %s): handed out again as %s",
				old, idle.Round(time.Second), limit, e.id))
		}
	}
	if x.left > 0 && !busy && now.Sub(x.active) >= limit {
		shown := missing[:min(len(missing), 5)]
		return fmt.Errorf("rl: external rollout: no agent claim, request or reward for %s (rollout.external_timeout): %d of %d episodes of batch %d have no reward (%s); is an agent running against the served API?",
			limit, x.left, len(batch), x.step, strings.Join(shown, ", "))
	}
	return nil
}

// Close ends training: claims are answered 410 from now on.
func (x *External) Close() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
}

// episode finds an episode a request may act on.
func (x *External) episode(id string) (*extEpisode, error) {
	e := x.episodes[id]
	switch {
	case e == nil && strings.HasPrefix(id, "ep-"):
		return nil, refuse(409, "episode %q is stale or unknown: the trainer is at batch %d and keeps only the episodes of its open batch", id, x.step)
	case e == nil:
		return nil, refuse(404, "episode %q is unknown: claim one with POST /v1/episodes/claim", id)
	case !x.open || e.step != x.step:
		return nil, refuse(409, "episode %q belongs to batch %d, which is closed: the policy has moved on", id, e.step)
	case e.done:
		return nil, refuse(409, "episode %q already has its reward", id)
	case e.busy:
		return nil, refuse(409, "episode %q already has a request in flight; an episode's turns come one at a time", id)
	}
	return e, nil
}

// Begin prepares the next request of episode id: on the first request the
// prompt is the rendered conversation; on later ones the messages must
// extend the previous request's, with the model's reply in between, and
// the ids of what the template adds after that reply are appended to the
// episode's own ids.
func (x *External) Begin(id string, msgs []tokenizer.Message, tools []json.RawMessage) (*ExternalTurn, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, err := x.episode(id)
	if err != nil {
		return nil, err
	}
	t := e.t
	turn := &ExternalTurn{Sampling: x.Cfg.Sampling, Stop: x.Stop, msgs: msgs,
		Seed: splitmix(x.seed ^ splitmix(uint64(e.index)<<20|uint64(e.turns)))}
	if e.turns == 0 {
		ids, err := x.Tok.EncodeChat(msgs, tools, true)
		if err != nil {
			return nil, refuse(400, "episode %q: rendering the chat template: %v", id, err)
		}
		if len(ids) > x.Cfg.MaxPromptTokens || len(ids) >= x.Engine.MaxLen() {
			return nil, refuse(400, "episode %q: the prompt of %d tokens exceeds max_prompt_tokens %d or the context of %d",
				id, len(ids), x.Cfg.MaxPromptTokens, x.Engine.MaxLen())
		}
		turn.obs = toInt32(ids)
		turn.Prompt = turn.obs
		e.tools = tools
	} else {
		if turn.obs, err = x.extension(e, msgs, tools); err != nil {
			return nil, err
		}
		turn.Prompt = append(slices.Clone(t.Tokens), turn.obs...)
	}
	promptLen := t.PromptLen
	if e.turns == 0 {
		promptLen = len(turn.obs)
	}
	limit := min(x.Cfg.MaxResponseTokens, x.Engine.MaxLen()-promptLen-1)
	room := limit - (len(turn.Prompt) - promptLen)
	turn.MaxTokens = min(x.Cfg.MaxTurnTokens, room)
	if turn.MaxTokens < 1 {
		return nil, refuse(400, "episode %q: the conversation holds %d response tokens, max_response_tokens %d leaves no room for another turn; report the reward",
			id, len(turn.Prompt)-promptLen, limit)
	}
	e.busy = true
	e.seen, x.active = time.Now(), time.Now()
	return turn, nil
}

// extension checks that msgs continue the episode and returns the ids of
// the text the template puts after the model's last turn.
func (x *External) extension(e *extEpisode, msgs []tokenizer.Message, tools []json.RawMessage) ([]int32, error) {
	prev := len(e.msgs)
	if len(msgs) < prev+2 {
		return nil, refuse(400, "episode %q: the request has %d messages; it must repeat the %d sent before, the assistant's reply, and add new ones",
			e.id, len(msgs), prev)
	}
	for i := 0; i < prev; i++ {
		if msgs[i].Role != e.msgs[i].Role || msgs[i].Content != e.msgs[i].Content {
			return nil, refuse(400, "episode %q: messages[%d] differs from the one sent before; an episode's conversation only grows", e.id, i)
		}
	}
	if msgs[prev].Role != "assistant" {
		return nil, refuse(400, "episode %q: messages[%d] must be the assistant's reply, not role %q", e.id, prev, msgs[prev].Role)
	}
	if msgs[prev+1].Role == "assistant" {
		return nil, refuse(400, "episode %q: messages[%d] is a second assistant turn; only the model writes assistant turns", e.id, prev+1)
	}
	head, err := x.Tok.Render(msgs[:prev+1], tools, false)
	if err != nil {
		return nil, refuse(400, "episode %q: rendering the chat template: %v", e.id, err)
	}
	full, err := x.Tok.Render(msgs, tools, true)
	if err != nil {
		return nil, refuse(400, "episode %q: rendering the chat template: %v", e.id, err)
	}
	if !strings.HasPrefix(full, head) {
		return nil, refuse(400, "episode %q: the chat template does not render the conversation as an extension of its first %d messages", e.id, prev+1)
	}
	// The model's turn ended on its stop id; what the template writes
	// after that id's text closes the turn (e.g. "<|im_end|>\n" after
	// "</tool_call>", "\n" after "<|im_end|>").
	t := e.t
	last := t.Tokens[len(t.Tokens)-1]
	closing := ""
	stopText := x.Tok.Decode([]int{int(last)})
	if i := strings.LastIndex(head, stopText); !e.cut && i >= 0 {
		closing = head[i+len(stopText):]
	} else if i := strings.LastIndex(head, "<|im_end|>"); i >= 0 {
		closing = head[i:]
	}
	return toInt32(x.Tok.Encode(closing + full[len(head):])), nil
}

// End files a finished request: the appended ids as context, the generated
// ids as actions with the sampler's log-probabilities.
func (x *External) End(id string, turn *ExternalTurn, gen *rl.Generation, genErr error) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.episodes[id]
	if e == nil || !e.busy {
		return refuse(409, "episode %q closed while its request ran", id)
	}
	e.busy = false
	e.seen, x.active = time.Now(), time.Now()
	if genErr != nil {
		return nil
	}
	t := e.t
	if e.turns == 0 {
		t.Tokens = slices.Clone(turn.obs)
		t.PromptLen = len(turn.obs)
		t.Action = make([]bool, len(turn.obs))
		t.LogProb = make([]float32, len(turn.obs))
	} else {
		t.ToolCallEnds = append(t.ToolCallEnds, len(t.Tokens)-1)
		t.Tokens = append(t.Tokens, turn.obs...)
		t.Action = append(t.Action, make([]bool, len(turn.obs))...)
		t.LogProb = append(t.LogProb, make([]float32, len(turn.obs))...)
	}
	for _, g := range gen.Tokens {
		t.Tokens = append(t.Tokens, g.ID)
		t.Action = append(t.Action, true)
		t.LogProb = append(t.LogProb, g.SampleLogprob)
	}
	e.turns++
	t.Turns = e.turns
	e.cut = gen.Finish != "stop"
	e.msgs = turn.msgs
	return nil
}

// Reward closes an episode with the agent's reward and optional rewards
// for the turns that ended in a tool call, in order. A nil reward asks the
// trainer to score the episode itself with the environment's outcome
// reward (env.reward) over the exact trajectory text, as built-in
// rollouts are scored.
func (x *External) Reward(id string, reward *float64, turnRewards []float64) (remaining int, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, err := x.episode(id)
	if err != nil {
		return 0, err
	}
	if e.turns == 0 {
		return 0, refuse(409, "episode %q has no completion yet: request at least one before its reward", id)
	}
	t := e.t
	callEnd := int32(-1)
	if id, ok := x.Tok.TokenID("</tool_call>"); ok {
		callEnd = int32(id)
	}
	calls := 0
	for i, tok := range t.Tokens {
		if t.Action[i] && tok == callEnd {
			calls++
		}
	}
	if len(turnRewards) > calls {
		return 0, refuse(400, "episode %q: %d turn rewards, but only %d turns ended in a tool call", id, len(turnRewards), calls)
	}
	t.ToolCalls = len(t.ToolCallEnds)
	t.ProcessRewards = slices.Clone(turnRewards)
	last := t.Tokens[len(t.Tokens)-1]
	switch {
	case e.cut && t.ResponseLen() >= min(x.Cfg.MaxResponseTokens, x.Engine.MaxLen()-t.PromptLen-1):
		t.Finish = rl.FinishLength
	case e.cut:
		t.Finish = rl.FinishTurnLimit
	case last == callEnd:
		t.Finish = rl.FinishMaxTurns
	default:
		t.Finish = rl.FinishAnswer
	}
	t.Outcome = e.ep.Outcome(x.Tok.Decode(toInts(t.Tokens)))
	if reward != nil {
		t.Outcome.Reward = *reward
	}
	e.done = true
	x.active = time.Now()
	x.left--
	if x.left == 0 {
		close(x.complete)
	}
	return x.left, nil
}

// splitmix is SplitMix64's finaliser: distinct inputs, unrelated seeds.
func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// toInt32 converts the tokenizer's ids to the model's.
func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// toInts converts model ids to the tokenizer's.
func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
