package env

import (
	"context"
	"encoding/json"

	"github.com/r1go/r1go/data"
)

// Environment is what the RL code needs from a task: episodes. The
// multi-hop QA task (Env, with its tools and its answer scorer) is one; a
// new task implements these two interfaces and reports its own metrics
// through Outcome, touching nothing in rl/.
type Environment interface {
	Episode() Episode
}

// Episode is one trajectory's environment: Reset with the sample, then one
// Step per model turn until a step is Done, then Outcome of the whole text.
type Episode interface {
	// Reset starts the episode and returns the prompt messages and the
	// tools' JSON schemas for the chat template.
	Reset(s data.Sample) ([]data.Message, []json.RawMessage)
	// Step runs the tool calls of one model turn.
	Step(ctx context.Context, turn string) StepResult
	// Outcome scores the finished trajectory's text (prompt and response
	// with the chat markup kept).
	Outcome(text string) Outcome
}

// Outcome is an episode's result: the outcome reward the estimator uses,
// and the task's named metrics, which the trainer logs as env/<name> (the
// mean over the step's trajectories that report it).
type Outcome struct {
	Reward  float64
	Metrics map[string]float64
}

// Episode starts an episode of the QA task (Environment).
func (e *Env) Episode() Episode { return e.NewEpisode() }

// Outcome is the QA task's outcome: the selected reward, and exact match,
// F1, cover EM and the format score as metrics.
func (t *ToolEnv) Outcome(text string) Outcome { return t.Score(text).Outcome() }

// Outcome names the QA scores as metrics: em, f1, cover_em, format.
func (s Scores) Outcome() Outcome {
	return Outcome{Reward: s.Score, Metrics: map[string]float64{"em": s.EM, "f1": s.F1, "cover_em": s.CoverEM, "format": s.Format}}
}
