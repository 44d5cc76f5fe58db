package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

const (
	callOpen  = "<tool_call>"
	callClose = "</tool_call>"
)

// choice follows one completion as its tokens arrive.
type choice struct {
	index   int
	ids     []int
	emitted int // bytes of content already streamed
	gen     *rl.Generation
	err     error
}

// text is the completion so far as the client sees it: the forced prefill
// and the decoded tokens without special ones, cut at the first stop
// string. hit says whether a stop string was found.
func (s *Server) text(p *params, ids []int) (text string, hit bool) {
	text = p.prefill + s.Tok.DecodeText(s.Tok.StripSpecial(ids))
	cut := len(text)
	for _, st := range p.stops {
		if i := strings.Index(text, st); i >= 0 && i < cut {
			cut, hit = i, true
		}
	}
	return text[:cut], hit
}

// split separates the content from the tool-call markup.
func split(text string, parse bool) (content, calls string) {
	if !parse {
		return text, ""
	}
	if i := strings.Index(text, callOpen); i >= 0 {
		return strings.TrimRightFunc(text[:i], unicode.IsSpace), text[i:]
	}
	return text, ""
}

// safeContent is the part of the content that no later token can change:
// it holds back an unfinished character, a tail that may begin a stop
// string or a tool call, and trailing space that a tool call would trim.
func safeContent(text string, p *params) string {
	content, calls := split(text, p.parse)
	if calls != "" {
		return content
	}
	content = strings.TrimRight(content, "\uFFFD")
	hold := func(tag string) {
		for k := min(len(tag)-1, len(content)); k > 0; k-- {
			if strings.HasSuffix(content, tag[:k]) {
				content = content[:len(content)-k]
				return
			}
		}
	}
	for _, st := range p.stops {
		hold(st)
	}
	if p.parse {
		hold(callOpen)
		content = strings.TrimRightFunc(content, unicode.IsSpace)
	}
	return content
}

// parseCalls turns Hermes <tool_call>{"name": ..., "arguments": ...}</tool_call>
// blocks into OpenAI tool calls. ok is false when any block is malformed.
func parseCalls(calls string) (out []ToolCall, ok bool) {
	for calls != "" {
		i := strings.Index(calls, callOpen)
		if i < 0 {
			break
		}
		rest := calls[i+len(callOpen):]
		j := strings.Index(rest, callClose)
		if j < 0 {
			return nil, false
		}
		var body struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(rest[:j]), &body) != nil || body.Name == "" || len(body.Arguments) == 0 {
			return nil, false
		}
		args := string(body.Arguments)
		var str string
		if json.Unmarshal(body.Arguments, &str) == nil {
			args = str // already a JSON string of the arguments
		}
		out = append(out, ToolCall{ID: newID("call_"), Type: "function", Function: FunctionCall{Name: body.Name, Arguments: args}})
		calls = rest[j+len(callClose):]
	}
	return out, len(out) > 0
}

// message builds a finished choice's message and finish reason.
func (s *Server) message(p *params, c *choice) (OutMessage, string) {
	text, hit := s.text(p, c.ids)
	content, calls := split(text, p.parse)
	finish := "stop"
	if c.gen.Finish == "length" && !hit {
		finish = "length"
	}
	msg := OutMessage{Role: "assistant"}
	if calls != "" {
		if tc, ok := parseCalls(calls); ok {
			msg.ToolCalls = tc
			finish = "tool_calls"
		} else {
			content = text // malformed markup stays visible as text
		}
	}
	if content != "" || msg.ToolCalls == nil {
		msg.Content = &content
	}
	return msg, finish
}

// logprob renders one token for the logprobs field; special tokens are not
// part of the content and get none.
func (s *Server) logprob(t rl.GenToken) (TokenLogprob, bool) {
	if s.Tok.IsSpecial(int(t.ID)) {
		return TokenLogprob{}, false
	}
	tok, b := s.tokenText(t.ID)
	out := TokenLogprob{Token: tok, Logprob: float64(t.Logprob), Bytes: b, TopLogprobs: []TopLogprob{}}
	for _, a := range t.Top {
		at, ab := s.tokenText(a.ID)
		out.TopLogprobs = append(out.TopLogprobs, TopLogprob{Token: at, Logprob: float64(a.Logprob), Bytes: ab})
	}
	return out, true
}

func (s *Server) tokenText(id int32) (string, []int) {
	raw := s.Tok.Decode([]int{int(id)})
	b := make([]int, len(raw))
	for i := 0; i < len(raw); i++ {
		b[i] = int(raw[i])
	}
	return s.Tok.DecodeText([]int{int(id)}), b
}

// event is one sampled token of one choice, for the stream writer.
type event struct {
	c    *choice
	tok  rl.GenToken
	done bool
}

// complete generates the request's choices and writes the response.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, p *params) {
	var (
		prompt []int32
		turn   *ExternalTurn
		stop   = append([]int32(nil), s.eos...)
	)
	if s.Cfg.StopAtToolCall && p.parse && s.callEnd >= 0 {
		stop = append(stop, s.callEnd)
	}
	samp, maxTok, seed := p.sampling, p.maxTokens, p.seed
	if p.episode != "" {
		var err error
		if turn, err = s.Episodes.Begin(p.episode, p.msgs, p.tools); err != nil {
			WriteError(w, err)
			return
		}
		prompt, samp, seed, stop = turn.Prompt, turn.Sampling, turn.Seed, turn.Stop
		maxTok = min(maxTok, turn.MaxTokens)
		p.prefill = ""
	} else {
		text, err := s.Tok.RenderChat(tokenizer.Chat{Messages: p.msgs, Tools: p.tools, AddGenerationPrompt: true, Vars: p.vars})
		if err != nil {
			writeError(w, invalid("messages", "rendering the chat template: %v", err))
			return
		}
		ids := s.Tok.Encode(text)
		if p.prefill != "" {
			ids = append(ids, s.Tok.Encode(p.prefill)...)
		}
		prompt = make([]int32, len(ids))
		for i, id := range ids {
			prompt[i] = int32(id)
		}
	}
	if len(prompt) >= s.Engine.MaxLen() {
		err := &APIError{Status: 400, Type: "invalid_request_error", Message: fmt.Sprintf(
			"the prompt is %d tokens; this model's context is %d tokens", len(prompt), s.Engine.MaxLen())}
		code := "context_length_exceeded"
		err.Code = &code
		if turn != nil {
			s.Episodes.End(p.episode, turn, nil, err)
		}
		writeError(w, err)
		return
	}

	choices := make([]*choice, p.n)
	var events chan event
	if p.stream {
		events = make(chan event, p.n*(maxTok+2))
	}
	var wg sync.WaitGroup
	for i := range choices {
		c := &choice{index: i}
		choices[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := rl.GenRequest{Prompt: prompt, Sampling: samp, Seed: seed + uint64(i), MaxTokens: maxTok, Stop: stop,
				Logprobs: p.logprobs, TopLogprobs: p.top}
			c.gen, c.err = s.Engine.Generate(ctx, req, func(t rl.GenToken) bool {
				c.ids = append(c.ids, int(t.ID))
				if events != nil {
					events <- event{c: c, tok: t}
				}
				if len(p.stops) == 0 {
					return false
				}
				_, hit := s.text(p, c.ids)
				return hit
			})
			if events != nil {
				events <- event{c: c, done: true}
			}
		}()
	}
	id := newID("chatcmpl-")
	if p.stream {
		s.stream(w, p, id, len(prompt), choices, events, func() error {
			wg.Wait()
			return s.endEpisode(p, turn, choices)
		})
		return
	}
	wg.Wait()
	if err := s.endEpisode(p, turn, choices); err != nil {
		WriteError(w, err)
		return
	}
	resp := ChatCompletion{ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: s.Cfg.ModelName,
		SystemFingerprint: "r1go", Usage: &Usage{PromptTokens: len(prompt)}}
	if p.tokenIDs {
		resp.PromptTokenIDs = prompt
	}
	for _, c := range choices {
		msg, finish := s.message(p, c)
		ch := Choice{Index: c.index, Message: msg, FinishReason: finish}
		if p.tokenIDs {
			ch.TokenIDs = c.gen.IDs()
		}
		if p.logprobs {
			ch.Logprobs = &ChoiceLogprb{Content: []TokenLogprob{}}
			for _, t := range c.gen.Tokens {
				if lp, ok := s.logprob(t); ok {
					ch.Logprobs.Content = append(ch.Logprobs.Content, lp)
				}
			}
		}
		resp.Choices = append(resp.Choices, ch)
		resp.Usage.CompletionTokens += len(c.gen.Tokens)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	writeJSON(w, 200, resp)
}

// endEpisode reports the first choice's generation (or error) to the
// tracker, and returns the first generation error.
func (s *Server) endEpisode(p *params, turn *ExternalTurn, choices []*choice) error {
	var first error
	for _, c := range choices {
		if c.err != nil {
			first = c.err
			break
		}
	}
	if turn != nil {
		if err := s.Episodes.End(p.episode, turn, choices[0].gen, first); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		var ae *APIError
		var hs interface{ HTTPStatus() int }
		if !errorsAs(first, &ae) && !errorsAs(first, &hs) {
			first = &APIError{Status: 500, Type: "server_error", Message: "generation failed: " + first.Error()}
		}
	}
	return first
}
