package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// stream writes the choices as server-sent events, one chunk per sampled
// token whose content can no longer change, in OpenAI's chunk shape: a
// first chunk with the role, content deltas, the tool calls once complete,
// a chunk with the finish reason, an optional usage chunk, then [DONE].
// Joined, the deltas are the non-streamed message.
func (s *Server) stream(w http.ResponseWriter, p *params, id string, promptLen int, choices []*choice, events <-chan event, finish func() error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	created := time.Now().Unix()
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(c ChunkChoice) {
		send(ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.Cfg.ModelName,
			SystemFingerprint: "r1go", Choices: []ChunkChoice{c}})
	}
	empty := ""
	for _, c := range choices {
		chunk(ChunkChoice{Index: c.index, Delta: Delta{Role: "assistant", Content: &empty}})
	}
	var failed error
	completion := 0
	for left := len(choices); left > 0; {
		ev := <-events
		c := ev.c
		if ev.done {
			left--
			if c.err != nil {
				failed = c.err
				continue
			}
			completion += len(c.gen.Tokens)
			msg, reason := s.message(p, c)
			if msg.Content != nil && len(*msg.Content) > c.emitted {
				rest := (*msg.Content)[c.emitted:]
				chunk(ChunkChoice{Index: c.index, Delta: Delta{Content: &rest}})
			}
			for k, tc := range msg.ToolCalls {
				k := k
				tc.Index = &k
				chunk(ChunkChoice{Index: c.index, Delta: Delta{ToolCalls: []ToolCall{tc}}})
			}
			chunk(ChunkChoice{Index: c.index, Delta: Delta{}, FinishReason: &reason})
			continue
		}
		var lp *ChoiceLogprb
		if p.logprobs {
			if t, ok := s.logprob(ev.tok); ok {
				lp = &ChoiceLogprb{Content: []TokenLogprob{t}}
			}
		}
		text, _ := s.text(p, c.ids)
		safe := safeContent(text, p)
		var delta *string
		if len(safe) > c.emitted {
			d := safe[c.emitted:]
			delta = &d
			c.emitted = len(safe)
		}
		if delta != nil || lp != nil {
			chunk(ChunkChoice{Index: c.index, Delta: Delta{Content: delta}, Logprobs: lp})
		}
	}
	if err := finish(); err != nil && failed == nil {
		failed = err
	}
	if failed != nil {
		var ae *APIError
		if !errors.As(failed, &ae) {
			ae = &APIError{Status: 500, Type: "server_error", Message: failed.Error()}
		}
		send(ErrorBody{Error: *ae})
		return
	}
	if p.req.StreamOptions != nil && p.req.StreamOptions.IncludeUsage {
		send(ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.Cfg.ModelName, SystemFingerprint: "r1go",
			Choices: []ChunkChoice{}, Usage: &Usage{PromptTokens: promptLen, CompletionTokens: completion, TotalTokens: promptLen + completion}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
