package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// TemplateKwargs are extra keyword arguments of a chat-template render, as
// transformers' apply_chat_template(**kwargs) takes them and verl's
// data.apply_chat_template_kwargs passes them: Qwen3's
// {"enable_thinking": false} renders an empty think block after the
// generation prompt. Written as a JSON object; the zero value is none.
type TemplateKwargs struct {
	text string         // the JSON object as given, for MarshalText
	vars map[string]any // its keys as template values
}

// reservedKwargs are the variables every render sets itself.
var reservedKwargs = []string{"messages", "tools", "add_generation_prompt"}

// ParseTemplateKwargs reads a JSON object of template keyword arguments;
// "" and "{}" give none. Keys a render sets itself (messages, tools,
// add_generation_prompt) are refused rather than silently overridden.
func ParseTemplateKwargs(s string) (TemplateKwargs, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "{}" || s == "null" {
		return TemplateKwargs{}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return TemplateKwargs{}, fmt.Errorf("tokenizer: chat template kwargs %s: not a JSON object (want e.g. {\"enable_thinking\": false})", quoteShort(s))
	}
	k := TemplateKwargs{text: s, vars: map[string]any{}}
	for name, raw := range obj {
		for _, r := range reservedKwargs {
			if name == r {
				return TemplateKwargs{}, fmt.Errorf("tokenizer: chat template kwargs: %q is set by the render itself", name)
			}
		}
		v, err := jsonValue(raw)
		if err != nil {
			return TemplateKwargs{}, fmt.Errorf("tokenizer: chat template kwargs: %s: %v", name, err)
		}
		k.vars[name] = v
	}
	return k, nil
}

// Vars returns the keyword arguments as template variables (nil for none).
func (k TemplateKwargs) Vars() map[string]any { return k.vars }

// Keys lists the argument names, sorted.
func (k TemplateKwargs) Keys() []string {
	var out []string
	for n := range k.vars {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// String is the JSON object as given ("{}" for none).
func (k TemplateKwargs) String() string {
	if k.text == "" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(k.text)) != nil {
		return k.text
	}
	return b.String()
}

// UnmarshalText makes TemplateKwargs a config value.
func (k *TemplateKwargs) UnmarshalText(b []byte) error {
	v, err := ParseTemplateKwargs(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// MarshalText writes the JSON object back.
func (k TemplateKwargs) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// SetTemplateKwargs makes every later render of t (Render, EncodeChat,
// RenderChat) receive k's variables; a Chat's own Vars win over them. Call
// it once, before the tokenizer is shared between goroutines.
func (t *Tokenizer) SetTemplateKwargs(k TemplateKwargs) { t.kwargs = k.vars }

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return fmt.Sprintf("%q", s)
}
