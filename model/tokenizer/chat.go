package tokenizer

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// qwen25Template is the built-in template for folders without one.
//
//go:embed qwen25.jinja
var qwen25Template string

// Message is one chat turn as transformers' apply_chat_template takes it.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant or tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant turns that call tools
	Name       string     `json:"name,omitempty"`         // tool turns: the tool's name
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool turns: the call answered
	// ReasoningContent is an assistant turn's reasoning, apart from its
	// answer, as vLLM's reasoning parsers return it and Qwen3's template
	// renders it inside <think></think>. nil: the message has none, and
	// the template sees no such key (null in JSON reads as nil).
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ToolCall is an assistant's call of a tool, in the OpenAI form
// {"type": "function", "function": {"name", "arguments"}}.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a tool and its arguments. Arguments is raw JSON so
// that key order survives: a JSON object is rendered as an object (the
// Qwen2.5 layout); a JSON string is rendered double-encoded, exactly as
// transformers renders OpenAI-style string arguments.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Chat is everything a template render takes.
type Chat struct {
	Messages            []Message
	Tools               []json.RawMessage // tool schemas, e.g. {"type":"function","function":{...}}
	AddGenerationPrompt bool
	Template            string         // a named template from the folder; "" for the default
	Vars                map[string]any // extra template variables (e.g. enable_thinking)
}

// Render renders a conversation with the folder's chat template, as
// transformers' apply_chat_template(messages, tools=tools,
// add_generation_prompt=..., tokenize=False) does.
func (t *Tokenizer) Render(messages []Message, tools []json.RawMessage, addGenerationPrompt bool) (string, error) {
	return t.RenderChat(Chat{Messages: messages, Tools: tools, AddGenerationPrompt: addGenerationPrompt})
}

// EncodeChat renders a conversation and encodes the text, as
// apply_chat_template(..., tokenize=True) does (special tokens parsed,
// nothing added).
func (t *Tokenizer) EncodeChat(messages []Message, tools []json.RawMessage, addGenerationPrompt bool) ([]int, error) {
	text, err := t.Render(messages, tools, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return t.Encode(text), nil
}

// ChatTemplate returns the default template text and where it came from
// ("built-in Qwen2.5" when the folder has none).
func (t *Tokenizer) ChatTemplate() (text, source string) {
	if t.templates.builtin {
		return t.templates.text, "built-in Qwen2.5"
	}
	return t.templates.text, t.templates.source
}

// RenderChat renders c with the default or a named template.
func (t *Tokenizer) RenderChat(c Chat) (string, error) {
	text, source := t.ChatTemplate()
	if c.Template != "" {
		named, ok := t.templates.named[c.Template]
		if !ok {
			return "", fmt.Errorf("tokenizer: no chat template named %q", c.Template)
		}
		text, source = named, c.Template
	}
	fail := func(err error) error {
		return fmt.Errorf("tokenizer: chat template %s: %w", source, err)
	}
	vars := map[string]any{"add_generation_prompt": c.AddGenerationPrompt}
	msgs := make(pyList, len(c.Messages))
	for i, m := range c.Messages {
		v, err := m.templateValue()
		if err != nil {
			return "", fail(fmt.Errorf("messages[%d]: %w", i, err))
		}
		msgs[i] = v
	}
	vars["messages"] = msgs
	if c.Tools != nil {
		tools := make(pyList, len(c.Tools))
		for i, raw := range c.Tools {
			v, err := jsonValue(raw)
			if err != nil {
				return "", fail(fmt.Errorf("tools[%d]: %w", i, err))
			}
			tools[i] = v
		}
		vars["tools"] = tools
	} else {
		vars["tools"] = nil
	}
	// transformers passes the special tokens map along.
	for name, tok := range map[string]string{
		"bos_token": t.config.BOSToken, "eos_token": t.config.EOSToken,
		"pad_token": t.config.PadToken, "unk_token": t.config.UnkToken,
	} {
		if tok != "" {
			vars[name] = tok
		}
	}
	if len(t.config.AdditionalSpecialTokens) > 0 {
		vars["additional_special_tokens"] = t.config.AdditionalSpecialTokens
	}
	for k, v := range t.kwargs {
		vars[k] = v
	}
	for k, v := range c.Vars {
		vars[k] = v
	}
	return renderJinja(text, vars, fail)
}

// templateValue is m as the ordered dict the template sees.
func (m Message) templateValue() (exec.Dict, error) {
	d := exec.Dict{}
	add := func(key string, val any) {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(val)})
	}
	add("role", m.Role)
	add("content", m.Content)
	// As transformers passes the message dict: the key only when the
	// message has it, so `is defined` tells reasoning given from none.
	if m.ReasoningContent != nil {
		add("reasoning_content", *m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls := make(pyList, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			fn := exec.Dict{}
			fn.Pairs = append(fn.Pairs, &exec.Pair{Key: exec.AsValue("name"), Value: exec.AsValue(c.Function.Name)})
			if len(c.Function.Arguments) > 0 {
				args, err := jsonValue(c.Function.Arguments)
				if err != nil {
					return d, fmt.Errorf("tool_calls[%d].function.arguments: %w", i, err)
				}
				fn.Pairs = append(fn.Pairs, &exec.Pair{Key: exec.AsValue("arguments"), Value: exec.AsValue(args)})
			}
			call := exec.Dict{}
			if c.ID != "" {
				call.Pairs = append(call.Pairs, &exec.Pair{Key: exec.AsValue("id"), Value: exec.AsValue(c.ID)})
			}
			kind := c.Type
			if kind == "" {
				kind = "function"
			}
			call.Pairs = append(call.Pairs,
				&exec.Pair{Key: exec.AsValue("type"), Value: exec.AsValue(kind)},
				&exec.Pair{Key: exec.AsValue("function"), Value: exec.AsValue(fn)})
			calls[i] = call
		}
		add("tool_calls", calls)
	}
	if m.Name != "" {
		add("name", m.Name)
	}
	if m.ToolCallID != "" {
		add("tool_call_id", m.ToolCallID)
	}
	return d, nil
}
