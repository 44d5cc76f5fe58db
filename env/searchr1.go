package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/r1go/r1go/data"
)

// StyleSearchR1 is Search-R1's protocol (search_r1/llm_agent/generation.py
// at a14dc3a): the model searches with <search> query </search> and
// answers with <answer> ... </answer>; retrieved passages come back inside
// the same assistant turn as "\n\n<information>...</information>\n\n",
// with no chat tokens around them. There is no JSON and no tool schema.
// SearchR1Env runs it; New refuses this style, which has no Toolset.
const StyleSearchR1 Style = "search-r1"

// SearchR1InvalidAction is the text Search-R1 appends after a turn with
// neither a search nor an answer.
const SearchR1InvalidAction = "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"

// SearchR1StopStrings end a Search-R1 model turn: the rollout stops
// sampling once the decoded turn ends with one of them (Search-R1 passes
// them to vLLM as stop strings and cuts the text after the first).
var SearchR1StopStrings = []string{"</search>", "</answer>"}

// StopHit reports whether a turn decoded so far holds one of stops (a
// token may carry text past the tag, so it looks for the tag anywhere, not
// only at the end). r1go's rollout (rl/stopstrings.go) checks the newest
// token's text incrementally instead and, unlike Search-R1, never
// re-encodes: the sampled tokens stay whole and only the text handed to
// Step is cut at the stop string.
func StopHit(turn string, stops []string) bool {
	for _, s := range stops {
		if strings.Contains(turn, s) {
			return true
		}
	}
	return false
}

// ErrInvalidAction is the step error kind of a Search-R1 turn with no
// action.
const ErrInvalidAction ErrorKind = "invalid-action"

// CutSearchR1Turn cuts a turn as Search-R1's _postprocess_responses does:
// after the first "</search>" if there is one, else after the first
// "</answer>", else unchanged. Note the order: a "</search>" anywhere wins
// over an earlier "</answer>".
func CutSearchR1Turn(turn string) string {
	for _, stop := range SearchR1StopStrings {
		if i := strings.Index(turn, stop); i >= 0 {
			return turn[:i+len(stop)]
		}
	}
	return turn
}

// ParseSearchR1Action is Search-R1's postprocess_predictions for one turn:
// re.search(r"<(search|answer)>(.*?)</\1>", turn, re.DOTALL), the content
// stripped; action "" when nothing matches. Written out by hand because
// RE2 has no backreference: the leftmost opening tag that has its own
// closing tag somewhere after it wins, and the content ends at the first
// such closing tag.
func ParseSearchR1Action(turn string) (action, content string) {
	for i := 0; i < len(turn); i++ {
		j := strings.IndexByte(turn[i:], '<')
		if j < 0 {
			break
		}
		i += j
		for _, tag := range [...]string{"search", "answer"} {
			open := "<" + tag + ">"
			if !strings.HasPrefix(turn[i:], open) {
				continue
			}
			rest := turn[i+len(open):]
			if k := strings.Index(rest, "</"+tag+">"); k >= 0 {
				return tag, pyStrip(rest[:k])
			}
		}
	}
	return "", ""
}

// SearchR1Answer is Search-R1's extract_solution over a whole trajectory
// text (prompt and response): the last <answer>…</answer>, stripped, but
// only when there are at least two (the Search-R1 prompt itself holds the
// example "<answer> Beijing </answer>").
func SearchR1Answer(text string) (string, bool) {
	ms := answerRe.FindAllStringSubmatch(text, -1)
	if len(ms) <= 1 {
		return "", false
	}
	return pyStrip(ms[len(ms)-1][1]), true
}

// SearchR1Config is Search-R1's v0.2 setting: up to 4 search turns and a
// final answer turn, the top 3 passages, strict EM of the last answer.
// MaxResponseChars, when positive, keeps that many characters of each
// observation (Search-R1 keeps max_obs_length=500 tokens of it, cutting
// the end); 0 keeps it whole.
func SearchR1Config() Config {
	c := DefaultConfig()
	c.Style = StyleSearchR1
	c.MaxTurns = 4
	c.MaxResponseChars = 0
	c.Prefill = ""
	c.Instruction = ""
	c.Reward = "search-r1-em"
	return c
}

// SearchR1Env holds what the episodes of a Search-R1 environment share: a
// retriever, the top-k, the config, the scorer and the tool counters.
type SearchR1Env struct {
	cfg    Config
	r      Retriever
	topK   int
	scorer *Scorer
	stats  ToolStats
}

// NewSearchR1 checks the config (Style must be StyleSearchR1; use
// SearchR1Config) and wraps the retriever searches go to.
func NewSearchR1(r Retriever, cfg Config, topK int) (*SearchR1Env, error) {
	if cfg.Style != StyleSearchR1 {
		return nil, fmt.Errorf("env: NewSearchR1: style %q, want %s", cfg.Style, StyleSearchR1)
	}
	if r == nil {
		return nil, errors.New("env: NewSearchR1: nil retriever")
	}
	if topK <= 0 {
		return nil, fmt.Errorf("env: search-r1: env.topk %d must be positive", topK)
	}
	if cfg.MaxTurns < 0 || cfg.MaxResponseChars < 0 || cfg.CallTimeout < 0 {
		return nil, errors.New("env: search-r1: env.max_turns, env.max_tool_response_length and the call timeout must not be negative")
	}
	scorer, err := NewScorer(cfg.Reward, cfg.Markup)
	if err != nil {
		return nil, err
	}
	return &SearchR1Env{cfg: cfg, r: r, topK: topK, scorer: scorer}, nil
}

// Config returns the env's config.
func (e *SearchR1Env) Config() Config { return e.cfg }

// StopStrings are the strings that end a model turn (SearchR1StopStrings).
func (e *SearchR1Env) StopStrings() []string { return SearchR1StopStrings }

// ToolStats counts the searches of every episode, as Env.ToolStats.
func (e *SearchR1Env) ToolStats() *ToolStats { return &e.stats }

// NewEpisode starts a fresh per-trajectory state.
func (e *SearchR1Env) NewEpisode() *SearchR1Episode { return &SearchR1Episode{env: e} }

// Episode starts an episode (Environment), so the rollout, the trainer and
// evaluation run Search-R1 episodes as they run the tool-call ones.
func (e *SearchR1Env) Episode() Episode { return e.NewEpisode() }

// Outcome is the episode's result (Episode): the configured reward
// (search-r1-em in SearchR1Config) and em, f1, cover_em and format of the
// extracted answer as metrics, the names the QA task logs.
func (ep *SearchR1Episode) Outcome(text string) Outcome { return ep.Score(text).Outcome() }

// SearchR1Episode is one Search-R1 trajectory: Reset, then Step once per
// model turn until Done. Not safe for concurrent use.
type SearchR1Episode struct {
	env    *SearchR1Env
	sample data.Sample
	turns  int
	done   bool
}

// Reset starts the episode: the sample's own prompt (a Search-R1 parquet
// row carries it), else Search-R1's base prompt around the question. There
// are no tool schemas: the protocol lives in the prompt text.
func (ep *SearchR1Episode) Reset(s data.Sample) ([]data.Message, []json.RawMessage) {
	ep.sample, ep.turns, ep.done = s, 0, false
	if len(s.Prompt) > 0 {
		return append([]data.Message(nil), s.Prompt...), nil
	}
	return []data.Message{{Role: "user", Content: data.SearchR1Prompt(s.Question)}}, nil
}

// Done says whether the episode has ended.
func (ep *SearchR1Episode) Done() bool { return ep.done }

// Step runs one model turn, already stopped at a stop string by the
// rollout (it is cut again with CutSearchR1Turn, so text past the first
// action is ignored as Search-R1 ignores it). An answer ends the episode;
// a search returns its passages as an in-turn observation; anything else
// gets SearchR1InvalidAction. The turn after MaxTurns turns is the last:
// Search-R1 generates it with searching off, so it ends the episode
// whatever it holds.
func (ep *SearchR1Episode) Step(ctx context.Context, turn string) StepResult {
	cfg := ep.env.cfg
	if ep.done {
		return StepResult{Done: true, Info: StepInfo{Turn: ep.turns}}
	}
	ep.turns++
	info := StepInfo{Turn: ep.turns, Success: true}
	action, content := ParseSearchR1Action(CutSearchR1Turn(turn))
	last := cfg.MaxTurns > 0 && ep.turns > cfg.MaxTurns
	switch {
	case action == "answer" || last:
		ep.done = true
		info.MaxTurns = last && action != "answer"
		return StepResult{Done: true, Info: info}
	case action == "search":
		docs, ci := ep.search(ctx, content)
		ep.env.stats.Add(ci)
		info.Calls, info.Tool, info.Success, info.ErrorKind = []CallInfo{ci}, ci.Tool, ci.Success, ci.ErrorKind
		obs := "\n\n<information>" + pyStrip(docs) + "</information>\n\n"
		if n := cfg.MaxResponseChars; n > 0 {
			if cut := Truncate(obs, n, TruncateRight); cut != obs {
				obs = cut
				info.Truncated++
			}
		}
		elided := "\n\n<information>" + ElidedMarker + "</information>\n\n"
		return StepResult{Observation: obs, Elided: elided, Info: info}
	default:
		info.Success, info.ErrorKind = false, ErrInvalidAction
		return StepResult{Observation: SearchR1InvalidAction, Elided: SearchR1InvalidAction, Info: info}
	}
}

// search runs one query; a failure becomes the observation's text, as any
// tool error does in this package.
func (ep *SearchR1Episode) search(ctx context.Context, query string) (string, CallInfo) {
	ci := CallInfo{Tool: "search"}
	if blank(query) {
		ci.ErrorKind, ci.Err, ci.Error = ErrInvalidArguments, errEmptyQuery, "empty query"
		return "Error: empty query", ci
	}
	if d := ep.env.cfg.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	start := time.Now()
	hits, err := ep.env.r.Retrieve(ctx, []string{query}, ep.env.topK)
	ci.Elapsed = time.Since(start)
	if err == nil && len(hits) != 1 {
		err = &ResponseError{fmt.Errorf("retriever answered %d result lists for 1 query", len(hits))}
	}
	if err != nil {
		ci.ErrorKind, ci.Err, ci.Error = ErrTool, err, err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			ci.ErrorKind = ErrTimeout
		}
		return "Error: " + err.Error(), ci
	}
	h := hits[0]
	if len(h) > ep.env.topK {
		h = h[:ep.env.topK]
	}
	ci.Success = true
	return FormatHits(h, FormatSearchR1), ci
}

// Score computes the outcome reward (Config.Reward, "search-r1-em" in
// SearchR1Config) over the whole trajectory text, and the answer metrics
// of the answer Search-R1 extracts (SearchR1Answer). Format is 1 when an
// answer was extracted.
func (ep *SearchR1Episode) Score(text string) Scores {
	out := ep.env.scorer.Score(ep.sample, text)
	out.Answer, out.HasAnswer = SearchR1Answer(text)
	out.EM, out.F1, out.CoverEM, out.Format = 0, 0, 0, 0
	if out.HasAnswer {
		out.Format = 1
		if len(ep.sample.Answers) > 0 {
			out.EM = ExactMatch(out.Answer, ep.sample.Answers)
			out.F1 = F1(out.Answer, ep.sample.Answers)
			out.CoverEM = CoverEM(out.Answer, ep.sample.Answers)
		}
	}
	return out
}

// PromptStyle tells which protocol a prompt asks the model to use:
// StyleSearchR1 when it names the <search> and </search> tags, StyleAgentR1
// (Hermes tool calls, which verl's style shares) when it names
// <tool_call>, "" when it names neither (the env's own instruction or a
// chat template's tool block will).
func PromptStyle(msgs []data.Message) Style {
	var search, hermes bool
	for _, m := range msgs {
		search = search || strings.Contains(m.Content, "<search>") && strings.Contains(m.Content, "</search>")
		hermes = hermes || strings.Contains(m.Content, "<tool_call>")
	}
	switch {
	case search && !hermes:
		return StyleSearchR1
	case hermes && !search:
		return StyleAgentR1
	}
	return ""
}

// CheckPromptStyle refuses a dataset whose prompts ask for one protocol
// while env.style expects another: a Search-R1 prompt under a Hermes
// tool-call style would end every episode with no call and reward 0, and
// nothing would say why. source names the files in the error.
func CheckPromptStyle(style Style, source string, samples []data.Sample) error {
	wantHermes := style == StyleAgentR1 || style == StyleVerl
	bad, first := 0, ""
	var asked Style
	for _, s := range samples {
		ps := PromptStyle(s.Prompt)
		if ps == "" || ps == style || (ps == StyleAgentR1 && wantHermes) {
			continue
		}
		if bad == 0 {
			first, asked = s.ID, ps
		}
		bad++
	}
	if bad == 0 {
		return nil
	}
	what := map[Style]string{
		StyleSearchR1: "Search-R1's <search> query </search> tags",
		StyleAgentR1:  "Hermes <tool_call> JSON",
	}
	fix := "env.style=" + string(StyleSearchR1)
	if asked == StyleAgentR1 {
		fix = "env.style=" + string(StyleAgentR1) + " (or verl)"
	}
	return fmt.Errorf("env: %s: %d of %d prompts (the first: sample %s) ask for %s, but env.style=%s expects %s: set %s",
		source, bad, len(samples), first, what[asked], style, styleWants(style), fix)
}

func styleWants(s Style) string {
	if s == StyleSearchR1 {
		return "<search> tags"
	}
	return "<tool_call> JSON"
}

// SearchR1Turns renders a gold trajectory (the synthetic world's) in
// Search-R1's protocol, the assistant turns a warm start under
// env.style=search-r1 imitates: "<think>…</think>\n<search> query
// </search>" per search, then "<think>…</think>\n<answer> answer
// </answer>".
func SearchR1Turns(g *data.Trajectory) []string {
	turns := make([]string, 0, len(g.Steps)+1)
	for _, s := range g.Steps {
		turns = append(turns, "<think>"+s.Thought+"</think>\n<search> "+s.Query+" </search>")
	}
	return append(turns, "<think>"+g.FinalThought+"</think>\n<answer> "+g.Answer+" </answer>")
}
