package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/r1go/r1go/model/tokenizer"
)

// The wire shapes of the Chat Completions API, as the official openai npm
// package types them (resources/chat/completions). Fields the server does
// not act on are accepted where OpenAI accepts them and ignored; unknown
// fields are ignored, as OpenAI does.

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Logprobs            *bool           `json:"logprobs,omitempty"`
	TopLogprobs         *int            `json:"top_logprobs,omitempty"`
	Stream              *bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	User                string          `json:"user,omitempty"`
	// ReturnTokenIDs is vLLM's extension: the response carries the prompt's
	// and each choice's token ids (non-streamed responses only).
	ReturnTokenIDs *bool `json:"return_token_ids,omitempty"`
	// ChatTemplateKwargs is vLLM's extension: keyword arguments of this
	// request's chat-template render (Qwen3's {"enable_thinking": false}),
	// over the server's own key by key.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
}

// StreamOptions asks for a final usage chunk.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message of the conversation. Content is a string, an
// array of text parts, or null (an assistant turn with tool calls).
// ReasoningContent is an assistant turn's reasoning apart from its answer,
// as vLLM accepts it back: the chat template gets it (Qwen3 renders it in
// <think></think>).
type ChatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	Type     string          `json:"type"`
	Function json.RawMessage `json:"function"`
}

// ToolCall is a call in an assistant message; Arguments is a JSON string.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"` // streaming deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatCompletion is the non-streamed response.
type ChatCompletion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // "chat.completion"
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint"`
	PromptTokenIDs    []int32  `json:"prompt_token_ids,omitempty"` // return_token_ids only
}

// Choice is one of the n completions.
type Choice struct {
	Index        int           `json:"index"`
	Message      OutMessage    `json:"message"`
	Logprobs     *ChoiceLogprb `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	TokenIDs     []int32       `json:"token_ids,omitempty"` // return_token_ids only
}

// OutMessage is the assistant message of a choice.
type OutMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ChoiceLogprb holds the log-probabilities of the content tokens.
type ChoiceLogprb struct {
	Content []TokenLogprob `json:"content"`
	Refusal []TokenLogprob `json:"refusal"`
}

// TokenLogprob is one token's log-probability and its best alternatives.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is an alternative token.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Usage counts the tokens of a request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatChunk is one server-sent event of a streamed response.
type ChatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"` // "chat.completion.chunk"
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage,omitempty"`
	SystemFingerprint string        `json:"system_fingerprint"`
}

// ChunkChoice is a choice's delta.
type ChunkChoice struct {
	Index        int           `json:"index"`
	Delta        Delta         `json:"delta"`
	Logprobs     *ChoiceLogprb `json:"logprobs,omitempty"`
	FinishReason *string       `json:"finish_reason"`
}

// Delta is what a chunk adds to the message.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Model is an entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}

// ErrorBody is OpenAI's error envelope.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError is an OpenAI-shaped error with its HTTP status.
type APIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *APIError) Error() string { return e.Message }

// invalid is a 400 invalid_request_error naming the parameter.
func invalid(param, format string, args ...any) *APIError {
	p := param
	var pp *string
	if p != "" {
		pp = &p
	}
	return &APIError{Status: 400, Type: "invalid_request_error", Param: pp, Message: fmt.Sprintf(format, args...)}
}

// content returns a message's text: a string, the concatenated text parts
// of an array, or "" for null.
func (m *ChatMessage) content(i int) (string, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(fmt.Sprintf("messages[%d].content", i), "messages[%d].content must be a string or an array of content parts", i)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", invalid(fmt.Sprintf("messages[%d].content[%d].type", i, j), "messages[%d].content[%d]: only text parts are supported, not %q", i, j, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// templateMessages converts the request's messages to the chat template's
// form, checking roles and tool-call fields.
func templateMessages(msgs []ChatMessage) ([]tokenizer.Message, error) {
	if len(msgs) == 0 {
		return nil, invalid("messages", "messages must hold at least one message")
	}
	out := make([]tokenizer.Message, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		text, err := m.content(i)
		if err != nil {
			return nil, err
		}
		tm := tokenizer.Message{Role: m.Role, Content: text, Name: m.Name}
		if m.ReasoningContent != nil && m.Role != "assistant" {
			return nil, invalid(fmt.Sprintf("messages[%d].reasoning_content", i), "messages[%d]: only an assistant message carries reasoning_content, not role %q", i, m.Role)
		}
		tm.ReasoningContent = m.ReasoningContent
		switch m.Role {
		case "system", "user", "developer":
			if m.Role == "developer" {
				tm.Role = "system"
			}
		case "assistant":
			for j, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return nil, invalid(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), "messages[%d].tool_calls[%d] names no function", i, j)
				}
				// The model wrote the arguments as a JSON object; render
				// them back as one, not as a quoted string.
				args := json.RawMessage(c.Function.Arguments)
				if !json.Valid(args) {
					q, _ := json.Marshal(c.Function.Arguments)
					args = q
				}
				tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: c.ID, Type: "function",
					Function: tokenizer.FunctionCall{Name: c.Function.Name, Arguments: args}})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d]: a tool message needs tool_call_id", i)
			}
			tm.ToolCallID = m.ToolCallID
		default:
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not system, developer, user, assistant or tool", i, m.Role)
		}
		out[i] = tm
	}
	return out, nil
}
