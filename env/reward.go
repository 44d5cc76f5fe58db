package env

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/r1go/r1go/data"
)

// Transcript is what an outcome reward reads: the whole decoded text of a
// trajectory (prompt and response, chat markup kept) and the assistant
// blocks cut out of it.
type Transcript struct {
	Text   string
	Blocks []string
}

// RewardFunc is an outcome reward over a whole trajectory. Every built-in
// reward has this one signature, so the registry never needs special cases.
type RewardFunc func(t Transcript, golds []string) float64

var (
	rewardMu  sync.RWMutex
	rewardReg = map[string]RewardFunc{}
)

// RegisterReward adds an outcome reward under name; a duplicate name is a
// programmer's mistake and panics.
func RegisterReward(name string, fn RewardFunc) {
	rewardMu.Lock()
	defer rewardMu.Unlock()
	if _, dup := rewardReg[name]; dup {
		panic("env: reward " + name + " registered twice")
	}
	rewardReg[name] = fn
}

// Reward returns the outcome reward registered under name.
func Reward(name string) (RewardFunc, error) {
	rewardMu.RLock()
	defer rewardMu.RUnlock()
	fn, ok := rewardReg[name]
	if !ok {
		return nil, fmt.Errorf("env: unknown reward %q (have %s)", name, strings.Join(rewardNamesLocked(), ", "))
	}
	return fn, nil
}

func rewardNamesLocked() []string {
	names := make([]string, 0, len(rewardReg))
	for n := range rewardReg {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	RegisterReward("agent-r1", AgentR1Reward)
	RegisterReward("agent-r1-acc", func(t Transcript, golds []string) float64 {
		a, ok := lastAnswer(t.Blocks)
		if !ok {
			return 0
		}
		return CoverEM(a, golds)
	})
	RegisterReward("paper", PaperReward)
	RegisterReward("em", answerMetric(ExactMatch))
	RegisterReward("cover-em", answerMetric(CoverEM))
	RegisterReward("f1", answerMetric(F1))
	RegisterReward("search-r1-em", SearchR1EM)
}

func answerMetric(m func(string, []string) float64) RewardFunc {
	return func(t Transcript, golds []string) float64 {
		a, ok := lastAnswer(t.Blocks)
		if !ok {
			return 0
		}
		return m(a, golds)
	}
}

var (
	answerRe = regexp.MustCompile(`(?s)<answer>(.*?)</answer>`)
	// Python's "$" without MULTILINE also matches before one final "\n";
	// "\n?\z" says the same in RE2.
	toolTurnRe   = regexp.MustCompile(`(?s)^<think>(.*?)</think>(.*?)<tool_call>(.*?)</tool_call>\n?\z`)
	answerTurnRe = regexp.MustCompile(`(?s)^<think>(.*?)</think>(.*?)<answer>(.*?)</answer>\n?\z`)
)

// firstAnswer is the stripped content of the first <answer> in block.
func firstAnswer(block string) (string, bool) {
	m := answerRe.FindStringSubmatch(block)
	if m == nil {
		return "", false
	}
	return pyStrip(m[1]), true
}

// lastAnswer is the first <answer> of the last assistant block, as
// Agent-R1 extracts it.
func lastAnswer(blocks []string) (string, bool) {
	if len(blocks) == 0 {
		return "", false
	}
	return firstAnswer(blocks[len(blocks)-1])
}

// validToolTurn is Agent-R1's test for a non-final block: each of the four
// tags exactly once, in the order think, tool_call, and nothing after.
func validToolTurn(b string) bool {
	for _, tag := range [...]string{"<think>", "</think>", "<tool_call>", "</tool_call>"} {
		if strings.Count(b, tag) != 1 {
			return false
		}
	}
	return toolTurnRe.MatchString(b)
}

func validAnswerTurn(b string) bool { return answerTurnRe.MatchString(b) }

// FormatScore is Agent-R1's format score before capping: 0.5 per valid
// tool-call turn and 0.5 for a final think/answer turn.
func FormatScore(blocks []string) float64 {
	if len(blocks) == 0 {
		return 0
	}
	s := 0.0
	for _, b := range blocks[:len(blocks)-1] {
		if validToolTurn(b) {
			s += 0.5
		}
	}
	if validAnswerTurn(blocks[len(blocks)-1]) {
		s += 0.5
	}
	return s
}

// AnswerScore is Agent-R1's answer score: 1 when the first <answer> of the
// last block covers a gold answer, else 0.2 when the whole last block does,
// else 0.
func AnswerScore(blocks []string, golds []string) float64 {
	if len(blocks) == 0 {
		return 0
	}
	last := blocks[len(blocks)-1]
	if a, ok := firstAnswer(last); ok && CoverEM(a, golds) == 1 {
		return 1
	}
	if CoverEM(last, golds) == 1 {
		return 0.2
	}
	return 0
}

// AgentR1Reward is Agent-R1 legacy's training reward
// (compute_score_format_answer): with F = min(format, 1),
// -1 + F + answer when F >= 0.5, else -1 + F. Range [-1, 1].
func AgentR1Reward(t Transcript, golds []string) float64 {
	f := min(FormatScore(t.Blocks), 1)
	if f >= 0.5 {
		return -1 + f + AnswerScore(t.Blocks, golds)
	}
	return -1 + f
}

// PaperReward is the paper's Eq. 6: r_format is the mean of two
// indicators, the final turn presents an answer (think/answer) and every
// earlier turn is a valid tool call (true when there is none); the reward
// is EM(answer, gold) when r_format is 1 and r_format - 1 otherwise.
func PaperReward(t Transcript, golds []string) float64 {
	if len(t.Blocks) == 0 {
		return -1
	}
	last := t.Blocks[len(t.Blocks)-1]
	fa, ft := 0.0, 1.0
	if validAnswerTurn(last) {
		fa = 1
	}
	for _, b := range t.Blocks[:len(t.Blocks)-1] {
		if !validToolTurn(b) {
			ft = 0
		}
	}
	if rf := (fa + ft) / 2; rf < 1 {
		return rf - 1
	}
	a, _ := firstAnswer(last)
	return ExactMatch(a, golds)
}

// SearchR1EM is Search-R1's qa_em reward: strict EM of the last <answer>
// anywhere in prompt plus response, and 0 unless there are at least two
// (the Search-R1 prompt itself holds one example answer).
func SearchR1EM(t Transcript, golds []string) float64 {
	ms := answerRe.FindAllStringSubmatch(t.Text, -1)
	if len(ms) <= 1 {
		return 0
	}
	return ExactMatch(pyStrip(ms[len(ms)-1][1]), golds)
}

// Scores is the outcome of one trajectory.
type Scores struct {
	Score     float64 // the selected reward
	EM        float64 // strict EM of the extracted answer
	F1        float64
	CoverEM   float64 // Agent-R1's logged "acc"
	Format    float64 // Agent-R1's format score, capped at 1
	Answer    string  // first <answer> of the last assistant block
	HasAnswer bool
}

// Scorer computes the selected outcome reward and the answer metrics.
type Scorer struct {
	Name   string
	Markup Markup
	reward RewardFunc
}

// NewScorer selects an outcome reward by name (see RegisterReward).
func NewScorer(name string, m Markup) (*Scorer, error) {
	fn, err := Reward(name)
	if err != nil {
		return nil, err
	}
	return &Scorer{Name: name, Markup: m, reward: fn}, nil
}

// Score scores a whole trajectory text (prompt and response with the chat
// markup kept).
func (s *Scorer) Score(sample data.Sample, text string) Scores {
	return s.score(sample, Transcript{Text: text, Blocks: s.Markup.AssistantBlocks(text)})
}

// ScoreBlocks scores a trajectory given as its assistant blocks.
func (s *Scorer) ScoreBlocks(sample data.Sample, blocks []string) Scores {
	var b strings.Builder
	for _, blk := range blocks {
		b.WriteString(s.Markup.AssistantStart)
		b.WriteString(blk)
		b.WriteString(s.Markup.TurnEnd)
	}
	return s.score(sample, Transcript{Text: b.String(), Blocks: blocks})
}

func (s *Scorer) score(sample data.Sample, t Transcript) Scores {
	out := Scores{Score: s.reward(t, sample.Answers), Format: min(FormatScore(t.Blocks), 1)}
	if a, ok := lastAnswer(t.Blocks); ok && len(sample.Answers) > 0 {
		out.Answer, out.HasAnswer = a, true
		out.EM = ExactMatch(a, sample.Answers)
		out.F1 = F1(a, sample.Answers)
		out.CoverEM = CoverEM(a, sample.Answers)
	} else if ok {
		out.Answer, out.HasAnswer = a, true
	}
	return out
}

// ProcessConfig selects the per-tool-call process reward of Step.
//
//   - "none": 0 (Agent-R1 legacy: its process-reward code is not wired in).
//   - "tool": the sum of the rewards the tools themselves returned
//     (Agent-R1 v0.1.0's ToolEnv.step); a call without one adds 0.
//   - "call-validity": Valid for each call that succeeded, Invalid for each
//     call that failed (bad JSON, unknown tool, invalid arguments, tool
//     error), plus any tool-returned reward.
//   - "evidence": Useful for each passage of the question's evidence chain
//     (the Evidence ids of Sample.Gold) that a search of the episode returns
//     for the first time, and Useless for each successful search call that
//     returns none, plus any tool-returned reward. It credits a search that
//     lands on the chain, the step the outcome reward cannot tell from a
//     miscopied name or an early answer; a passage found again earns
//     nothing, so repeating a search does not pay, and a negative Useless
//     charges the searches past the chain's end that a policy paid for
//     finding evidence learns to make. Questions without a gold chain earn
//     0: cmd/train refuses this reward for data that has none.
//
// Normalising the per-call rewards over a batch (Agent-R1's prime_norm) is
// the trainer's job, not the env's.
type ProcessConfig struct {
	Name    string  `yaml:"name" help:"per-tool-call process reward: none, tool (the tools' own rewards), call-validity or evidence (searches that find the question's evidence chain)"`
	Valid   float64 `yaml:"valid" help:"call-validity: reward per successful call"`
	Invalid float64 `yaml:"invalid" help:"call-validity: reward per failed call (usually negative)"`
	Useful  float64 `yaml:"useful" help:"evidence: reward per passage of the question's evidence chain a search returns first"`
	Useless float64 `yaml:"useless" help:"evidence: reward per search that returns no new passage of the chain (usually negative)"`
}

// processFunc rewards one step's calls; ep is the episode, whose sample
// and found passages the evidence reward reads and updates.
type processFunc func(ep *ToolEnv, calls []CallInfo) float64

// ProcessNames lists the process rewards.
func ProcessNames() []string { return []string{"call-validity", "evidence", "none", "tool"} }

// NeedsEvidence says whether the process reward reads each question's
// evidence chain (Sample.Gold), which only some datasets carry.
func (c ProcessConfig) NeedsEvidence() bool { return c.Name == "evidence" }

// HasEvidence says whether s names the passages of its evidence chain.
func HasEvidence(s data.Sample) bool {
	if s.Gold == nil || len(s.Gold.Steps) == 0 {
		return false
	}
	for _, st := range s.Gold.Steps {
		if st.Evidence == "" {
			return false
		}
	}
	return true
}

func processReward(c ProcessConfig) (processFunc, error) {
	toolSum := func(_ *ToolEnv, calls []CallInfo) float64 {
		s := 0.0
		for _, ci := range calls {
			if ci.Reward != nil {
				s += *ci.Reward
			}
		}
		return s
	}
	switch c.Name {
	case "", "none":
		return func(*ToolEnv, []CallInfo) float64 { return 0 }, nil
	case "tool":
		return toolSum, nil
	case "evidence":
		return func(ep *ToolEnv, calls []CallInfo) float64 {
			found, useless := ep.newEvidence(calls)
			return toolSum(ep, calls) + c.Useful*float64(found) + c.Useless*float64(useless)
		}, nil
	case "call-validity":
		return func(ep *ToolEnv, calls []CallInfo) float64 {
			s := toolSum(ep, calls)
			for _, ci := range calls {
				if ci.Success {
					s += c.Valid
				} else {
					s += c.Invalid
				}
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("env: unknown process reward %q (have %s)", c.Name, strings.Join(ProcessNames(), ", "))
}
