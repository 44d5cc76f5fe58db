// Package serve is an OpenAI-compatible HTTP endpoint over r1go's
// continuous-batching engine (rl.Engine): POST /v1/chat/completions and GET
// /v1/models, with tools, streaming, log-probabilities and usage. The
// central type is Server. Every malformed request is answered with
// OpenAI's error envelope and a 4xx status naming the offending parameter;
// nothing malformed reaches the engine. vLLM's extensions are accepted:
// return_token_ids, chat_template_kwargs (a request's template keyword
// arguments, e.g. Qwen3's {"enable_thinking": false}) and an assistant
// message's reasoning_content, which the chat template receives as
// transformers passes it.
//
// During training in rollout.mode=external the same server runs on the
// live policy and hands requests that carry an episode id to an Episodes
// tracker (External, external.go), which keeps the exact token ids it generated.
package serve

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

// EpisodeHeader carries a request's training episode id; the request's
// `user` field is read when the header is absent.
const EpisodeHeader = "X-R1go-Episode"

// Config bounds what one request and all requests together may ask for.
type Config struct {
	ModelName      string `yaml:"model_name" help:"the id GET /v1/models lists and responses carry"`
	MaxBodyBytes   int64  `yaml:"max_body_bytes" help:"largest request body accepted"`
	MaxTokens      int    `yaml:"max_tokens" help:"completion tokens per choice at most (and the default)"`
	MaxN           int    `yaml:"max_n" help:"choices per request at most"`
	MaxConcurrent  int    `yaml:"max_concurrent" help:"requests in flight at once; more are answered 429"`
	StopAtToolCall bool   `yaml:"stop_at_tool_call" help:"end a turn at </tool_call>, one call per turn, as the built-in rollout does"`
}

// DefaultConfig is a server for one model folder. A turn ends at
// </tool_call> as in r1go's rollouts, so a policy trained here calls one
// tool per turn; stop_at_tool_call=false lets a model write parallel calls.
func DefaultConfig() Config {
	return Config{ModelName: "r1go", MaxBodyBytes: 1 << 20, MaxTokens: 1024, MaxN: 8, MaxConcurrent: 256, StopAtToolCall: true}
}

// Episodes is the trainer's side of an external rollout: it turns an
// episode's conversation into prompt ids and records what was generated.
type Episodes interface {
	Begin(id string, msgs []tokenizer.Message, tools []json.RawMessage) (*ExternalTurn, error)
	// End is called once for every successful Begin, with the generation
	// or the error that ended it.
	End(id string, turn *ExternalTurn, gen *rl.Generation, err error) error
	// ServeHTTP answers /v1/episodes/... (claiming episodes, rewards).
	http.Handler
}

// Server answers the API from an engine.
type Server struct {
	Cfg      Config
	Engine   *rl.Engine
	Tok      *tokenizer.Tokenizer
	Episodes Episodes // nil outside training

	eos      []int32 // ids that end an assistant turn (<|im_end|>, <|endoftext|>)
	callEnd  int32   // </tool_call>, or -1
	sem      chan struct{}
	created  int64
	mux      *http.ServeMux
	initOnce sync.Once
}

// New makes a server; the tokenizer must know <|im_end|>.
func New(cfg Config, eng *rl.Engine, tok *tokenizer.Tokenizer) (*Server, error) {
	if cfg.MaxBodyBytes <= 0 || cfg.MaxTokens <= 0 || cfg.MaxN <= 0 || cfg.MaxConcurrent <= 0 {
		return nil, fmt.Errorf("serve: max_body_bytes %d, max_tokens %d, max_n %d and max_concurrent %d must all be ≥ 1",
			cfg.MaxBodyBytes, cfg.MaxTokens, cfg.MaxN, cfg.MaxConcurrent)
	}
	s := &Server{Cfg: cfg, Engine: eng, Tok: tok, callEnd: -1, sem: make(chan struct{}, cfg.MaxConcurrent), created: time.Now().Unix()}
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(name); ok {
			s.eos = append(s.eos, int32(id))
		}
	}
	if id, ok := tok.EOS(); ok && !slices.Contains(s.eos, int32(id)) {
		s.eos = append(s.eos, int32(id))
	}
	if len(s.eos) == 0 {
		return nil, errors.New("serve: the tokenizer has no <|im_end|>, <|endoftext|> or EOS token to end a turn")
	}
	if id, ok := tok.TokenID("</tool_call>"); ok {
		s.callEnd = int32(id)
	}
	return s, nil
}

// ServeHTTP routes the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.initOnce.Do(func() {
		s.mux = http.NewServeMux()
		s.mux.HandleFunc("/v1/chat/completions", s.handleChat)
		s.mux.HandleFunc("/v1/models", s.handleModels)
		s.mux.HandleFunc("/v1/models/{id}", s.handleModels)
		s.mux.HandleFunc("/v1/episodes/", func(w http.ResponseWriter, r *http.Request) {
			if s.Episodes == nil {
				writeError(w, &APIError{Status: 404, Type: "invalid_request_error", Message: "this server is not training: there are no episodes"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.Cfg.MaxBodyBytes)
			s.Episodes.ServeHTTP(w, r)
		})
		s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &APIError{Status: 404, Type: "invalid_request_error", Message: fmt.Sprintf("unknown path %s %s", r.Method, r.URL.Path)})
		})
	})
	s.mux.ServeHTTP(w, r)
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, &APIError{Status: 405, Type: "invalid_request_error", Message: "use GET for " + r.URL.Path})
		return
	}
	m := Model{ID: s.Cfg.ModelName, Object: "model", Created: s.created, OwnedBy: "r1go"}
	if id := r.PathValue("id"); id != "" {
		if id != s.Cfg.ModelName {
			writeError(w, &APIError{Status: 404, Type: "invalid_request_error", Message: fmt.Sprintf("the model %q does not exist; this server has %q", id, s.Cfg.ModelName)})
			return
		}
		writeJSON(w, 200, m)
		return
	}
	writeJSON(w, 200, ModelList{Object: "list", Data: []Model{m}})
}

// WriteError writes err in OpenAI's envelope: an *APIError as it is, an
// error with an HTTPStatus method with that status, anything else as 500.
func WriteError(w http.ResponseWriter, err error) {
	var ae *APIError
	if errors.As(err, &ae) {
		writeError(w, ae)
		return
	}
	st := 500
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		st = hs.HTTPStatus()
	}
	typ := "invalid_request_error"
	if st >= 500 {
		typ = "server_error"
	}
	writeError(w, &APIError{Status: st, Type: typ, Message: err.Error()})
}

func writeError(w http.ResponseWriter, e *APIError) {
	writeJSON(w, e.Status, ErrorBody{Error: *e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// params is a validated request.
type params struct {
	req       ChatRequest
	msgs      []tokenizer.Message
	tools     []json.RawMessage
	vars      map[string]any // chat_template_kwargs
	parse     bool           // parse tool calls out of the text
	prefill   string         // forced opening of the answer (tool_choice required or named)
	sampling  model.Sampling
	maxTokens int
	stops     []string
	n         int
	seed      uint64
	logprobs  bool
	top       int
	stream    bool
	tokenIDs  bool
	episode   string
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, &APIError{Status: 405, Type: "invalid_request_error", Message: "use POST for /v1/chat/completions"})
		return
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		writeError(w, &APIError{Status: 429, Type: "rate_limit_error", Message: fmt.Sprintf("more than %d requests in flight; retry later", s.Cfg.MaxConcurrent)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.Cfg.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, &APIError{Status: 413, Type: "invalid_request_error", Message: fmt.Sprintf("the request body exceeds %d bytes", s.Cfg.MaxBodyBytes)})
			return
		}
		writeError(w, invalid("", "reading the request body: %v", err))
		return
	}
	p, err := s.parse(body)
	if err != nil {
		WriteError(w, err)
		return
	}
	p.episode = r.Header.Get(EpisodeHeader)
	if p.episode == "" && s.Episodes != nil {
		p.episode = p.req.User
	}
	if p.episode != "" && s.Episodes == nil {
		writeError(w, invalid("", "this server is not training: the %s header names no episode", EpisodeHeader))
		return
	}
	if p.episode != "" && p.n != 1 {
		writeError(w, invalid("n", "an episode's request must ask for n = 1, not %d", p.n))
		return
	}
	if p.episode != "" && p.vars != nil {
		// Every turn of an episode must render as an extension of the
		// last, under the trainer's data.apply_chat_template_kwargs.
		writeError(w, invalid("chat_template_kwargs", "an episode's chat is rendered with the trainer's data.apply_chat_template_kwargs; leave chat_template_kwargs out of its requests"))
		return
	}
	s.complete(r.Context(), w, p)
}

// parse validates the request body.
func (s *Server) parse(body []byte) (*params, error) {
	p := &params{}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(&p.req); err != nil {
		return nil, invalid("", "the body is not a valid chat completion request: %v", err)
	}
	q := &p.req
	var err error
	if p.msgs, err = templateMessages(q.Messages); err != nil {
		return nil, err
	}
	kw, err := tokenizer.ParseTemplateKwargs(string(q.ChatTemplateKwargs))
	if err != nil {
		return nil, invalid("chat_template_kwargs", "chat_template_kwargs: %v", err)
	}
	p.vars = kw.Vars()
	for i, t := range q.Tools {
		if t.Type != "function" {
			return nil, invalid(fmt.Sprintf("tools[%d].type", i), "tools[%d].type %q is not function", i, t.Type)
		}
		var f struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t.Function, &f) != nil || f.Name == "" {
			return nil, invalid(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function needs a name", i)
		}
		raw, _ := json.Marshal(t)
		p.tools = append(p.tools, raw)
	}
	if err := p.toolChoice(); err != nil {
		return nil, err
	}
	p.sampling = model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	if v := q.Temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return nil, invalid("temperature", "temperature %v must lie in [0, 2]", *v)
		}
		p.sampling.Temperature = *v
	}
	if v := q.TopP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return nil, invalid("top_p", "top_p %v must lie in (0, 1]", *v)
		}
		p.sampling.TopP = *v
	}
	p.maxTokens = s.Cfg.MaxTokens
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if m.v == nil {
			continue
		}
		if *m.v < 1 || *m.v > s.Cfg.MaxTokens {
			return nil, invalid(m.name, "%s %d must lie in [1, %d]", m.name, *m.v, s.Cfg.MaxTokens)
		}
		p.maxTokens = *m.v
	}
	if len(q.Stop) > 0 && string(q.Stop) != "null" {
		var one string
		if json.Unmarshal(q.Stop, &one) == nil {
			p.stops = []string{one}
		} else if json.Unmarshal(q.Stop, &p.stops) != nil {
			return nil, invalid("stop", "stop must be a string or an array of strings")
		}
		if len(p.stops) > 4 {
			return nil, invalid("stop", "stop holds %d sequences, at most 4 are allowed", len(p.stops))
		}
		if slices.Contains(p.stops, "") {
			return nil, invalid("stop", "stop sequences must not be empty")
		}
	}
	p.n = 1
	if q.N != nil {
		if *q.N < 1 || *q.N > s.Cfg.MaxN {
			return nil, invalid("n", "n %d must lie in [1, %d]", *q.N, s.Cfg.MaxN)
		}
		p.n = *q.N
	}
	if q.Seed != nil {
		p.seed = uint64(*q.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		p.seed = binary.LittleEndian.Uint64(b[:])
	}
	p.logprobs = q.Logprobs != nil && *q.Logprobs
	if q.TopLogprobs != nil {
		if *q.TopLogprobs < 0 || *q.TopLogprobs > 20 {
			return nil, invalid("top_logprobs", "top_logprobs %d must lie in [0, 20]", *q.TopLogprobs)
		}
		if !p.logprobs {
			return nil, invalid("top_logprobs", "top_logprobs needs logprobs: true")
		}
		p.top = *q.TopLogprobs
	}
	p.stream = q.Stream != nil && *q.Stream
	p.tokenIDs = q.ReturnTokenIDs != nil && *q.ReturnTokenIDs
	if p.tokenIDs && p.stream {
		return nil, invalid("return_token_ids", "return_token_ids is only supported without streaming")
	}
	if q.StreamOptions != nil && !p.stream {
		return nil, invalid("stream_options", "stream_options is only allowed with stream: true")
	}
	return p, nil
}

// toolChoice reads tool_choice: "none", "auto", "required" or a named
// function. A required or named call is forced by opening the answer with
// the call's own markup, so the model writes the rest.
func (p *params) toolChoice() error {
	p.parse = len(p.tools) > 0
	raw := p.req.ToolChoice
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "none":
			p.parse = false
		case "auto":
		case "required":
			if len(p.tools) == 0 {
				return invalid("tool_choice", "tool_choice required needs tools")
			}
			p.prefill = "<tool_call>\n"
		default:
			return invalid("tool_choice", "tool_choice %q is not none, auto or required", mode)
		}
		return nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Function.Name == "" {
		return invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
	}
	found := false
	for _, t := range p.tools {
		var tt struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		json.Unmarshal(t, &tt)
		found = found || tt.Function.Name == named.Function.Name
	}
	if !found {
		return invalid("tool_choice", "tool_choice names %q, which is not among the tools", named.Function.Name)
	}
	name, _ := json.Marshal(named.Function.Name)
	p.prefill = `<tool_call>` + "\n" + `{"name": ` + string(name) + `, "arguments": `
	return nil
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
