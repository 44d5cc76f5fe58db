package serve

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/r1go/r1go/data"
)

// The episode endpoints of rollout.mode=external, under /v1/episodes/:
//
//	POST /v1/episodes/claim         → 200 an ExternalTask; 204 while no
//	                                  episode is open; 410 after training
//	POST /v1/episodes/{id}/reward   ← {"reward": r, "turn_rewards": [...]}
//	                                  → 200 {"episode_id", "remaining"}
//
// A reward body without "reward" ({}) has the trainer score the episode
// with its environment's outcome reward.
//
// Errors use OpenAI's envelope, {"error": {"message", "type", ...}}.

// ExternalTask is a claimed episode: what the agent needs to run it.
type ExternalTask struct {
	EpisodeID string            `json:"episode_id"`
	TaskID    string            `json:"task_id"` // the GRPO group: N episodes share it
	Batch     int               `json:"batch"`
	Question  string            `json:"question"`
	Answers   []string          `json:"answers"` // gold answers, for the agent's reward
	Messages  []data.Message    `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
}

// RewardRequest is the body of POST /v1/episodes/{id}/reward.
type RewardRequest struct {
	Reward      *float64  `json:"reward"` // nil: the environment's outcome reward
	TurnRewards []float64 `json:"turn_rewards,omitempty"`
}

// Claim hands out the next unclaimed episode of the open batch; ok is
// false when there is none right now.
func (x *External) Claim() (task ExternalTask, ok bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return task, false, refuse(410, "training has ended: there are no more episodes")
	}
	if x.open {
		x.active = time.Now() // a polling agent is alive, even with nothing to claim
	}
	if !x.open || len(x.unclaim) == 0 {
		return task, false, nil
	}
	e := x.unclaim[0]
	x.unclaim = x.unclaim[1:]
	e.claimed = true
	e.seen = time.Now()
	msgs := make([]data.Message, len(e.msgs))
	for i, m := range e.msgs {
		msgs[i] = data.Message{Role: m.Role, Content: m.Content}
	}
	smp := e.t.Sample
	return ExternalTask{EpisodeID: e.id, TaskID: e.task, Batch: e.step, Question: smp.Question,
		Answers: smp.Answers, Messages: msgs, Tools: e.tools}, true, nil
}

// ServeHTTP answers the episode endpoints.
func (x *External) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/episodes/")
	if r.Method != http.MethodPost {
		httpError(w, refuse(405, "use POST for %s", r.URL.Path))
		return
	}
	if rest == "claim" {
		task, ok, err := x.Claim()
		switch {
		case err != nil:
			httpError(w, err)
		case !ok:
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(w, 200, task)
		}
		return
	}
	id, ok := strings.CutSuffix(rest, "/reward")
	if !ok || id == "" || strings.Contains(id, "/") {
		httpError(w, refuse(404, "unknown path %s: use /v1/episodes/claim or /v1/episodes/{id}/reward", r.URL.Path))
		return
	}
	var req RewardRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		httpError(w, refuse(400, "episode %q: the reward body is not {\"reward\": number, \"turn_rewards\": [numbers]}: %v", id, err))
		return
	}
	if req.Reward != nil && (math.IsNaN(*req.Reward) || math.IsInf(*req.Reward, 0)) {
		httpError(w, refuse(400, "episode %q: reward must be a finite number", id))
		return
	}
	for i, v := range req.TurnRewards {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			httpError(w, refuse(400, "episode %q: turn_rewards[%d] must be a finite number", id, i))
			return
		}
	}
	left, err := x.Reward(id, req.Reward, req.TurnRewards)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"episode_id": id, "remaining": left})
}

func httpError(w http.ResponseWriter, err error) {
	st := 500
	var xe *ExternalError
	if errors.As(err, &xe) {
		st = xe.Status
	}
	typ := "invalid_request_error"
	if st >= 500 {
		typ = "server_error"
	}
	writeJSON(w, st, map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "param": nil, "code": nil}})
}
