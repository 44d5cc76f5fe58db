// Package goagent is the search agent of examples/search_agent written in
// Go: the same loop as agent.mjs, through plain HTTP and JSON, so that Go
// tests drive r1go's external rollout mode the way the Node agent does. The
// central type is Agent; a failed HTTP exchange is returned as an error
// naming the endpoint and the status.
//
// An episode: claim it (POST /v1/episodes/claim), ask the model for the
// next turn (POST /v1/chat/completions with the episode id in the
// X-R1go-Episode header), run each tool call it returns with the agent's
// own search, send the results back as tool messages, and when the model
// answers without a call, report the reward (POST
// /v1/episodes/{id}/reward).
package goagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Task is a claimed episode.
type Task struct {
	EpisodeID string            `json:"episode_id"`
	TaskID    string            `json:"task_id"`
	Batch     int               `json:"batch"`
	Question  string            `json:"question"`
	Answers   []string          `json:"answers"`
	Messages  []Message         `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
}

// Message is a chat message as the API takes it.
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a tool call of an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Turn is one served request of an episode, as token ids.
type Turn struct {
	Prompt     []int32
	Completion []int32
}

// Agent runs episodes against an r1go trainer.
type Agent struct {
	BaseURL  string // e.g. http://127.0.0.1:8000/v1
	HTTP     *http.Client
	MaxTurns int // model turns per episode
	// Search runs the agent's own search tool.
	Search func(ctx context.Context, query string) (string, error)
	// Reward scores a finished episode from its final answer text; nil
	// (or a nil result) lets the trainer score it with its environment.
	Reward func(t *Task, answer string) *float64
	// OnTurn, when set, receives each request's token ids.
	OnTurn func(episode string, t Turn)
}

// ErrDone says training has ended.
var ErrDone = errors.New("goagent: training has ended")

func (a *Agent) post(ctx context.Context, path string, header map[string]string, body, out any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", a.BaseURL+path, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := a.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("goagent: POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("goagent: POST %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

// Claim takes the next open episode; ok is false while none is open.
func (a *Agent) Claim(ctx context.Context) (t *Task, ok bool, err error) {
	t = &Task{}
	st, err := a.post(ctx, "/episodes/claim", nil, struct{}{}, t)
	switch {
	case st == http.StatusGone:
		return nil, false, ErrDone
	case err != nil:
		return nil, false, err
	case st == http.StatusNoContent:
		return nil, false, nil
	}
	return t, true, nil
}

// Work claims and runs episodes until training ends or ctx is done.
func (a *Agent) Work(ctx context.Context) error {
	for {
		t, ok, err := a.Claim(ctx)
		if errors.Is(err, ErrDone) {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		if err := a.Episode(ctx, t); err != nil {
			return err
		}
	}
}

// Episode runs one claimed episode and reports its reward.
func (a *Agent) Episode(ctx context.Context, t *Task) error {
	msgs := t.Messages
	header := map[string]string{"X-R1go-Episode": t.EpisodeID}
	answer := ""
	for turn := 0; turn < a.MaxTurns; turn++ {
		var resp struct {
			PromptTokenIDs []int32 `json:"prompt_token_ids"`
			Choices        []struct {
				Message      Message `json:"message"`
				FinishReason string  `json:"finish_reason"`
				TokenIDs     []int32 `json:"token_ids"`
			} `json:"choices"`
		}
		st, err := a.post(ctx, "/chat/completions", header,
			map[string]any{"model": "r1go", "messages": msgs, "tools": t.Tools, "return_token_ids": a.OnTurn != nil}, &resp)
		if st == http.StatusBadRequest {
			break // the episode is out of room: report what it has
		}
		if err != nil {
			return err
		}
		ch := resp.Choices[0]
		if a.OnTurn != nil {
			a.OnTurn(t.EpisodeID, Turn{Prompt: resp.PromptTokenIDs, Completion: ch.TokenIDs})
		}
		msg := ch.Message
		if msg.Content != nil {
			answer = *msg.Content
		}
		if len(msg.ToolCalls) == 0 {
			break
		}
		msgs = append(msgs, msg)
		for _, c := range msg.ToolCalls {
			var args struct {
				Query string `json:"query"`
			}
			result := ""
			if c.Function.Name != "search" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
				result = "Error: unknown tool or invalid arguments"
			} else if result, err = a.Search(ctx, args.Query); err != nil {
				result = "Error: " + err.Error()
			}
			msgs = append(msgs, Message{Role: "tool", Content: &result, ToolCallID: c.ID})
		}
	}
	body := map[string]any{}
	if a.Reward != nil {
		if r := a.Reward(t, answer); r != nil {
			body["reward"] = *r
		}
	}
	_, err := a.post(ctx, "/episodes/"+t.EpisodeID+"/reward", nil, body, nil)
	return err
}
