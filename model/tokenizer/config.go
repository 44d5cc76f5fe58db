package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Config is the part of tokenizer_config.json the tokenizer uses.
type Config struct {
	BOSToken string // "" when null or absent
	EOSToken string
	PadToken string
	UnkToken string
	// AdditionalSpecialTokens is passed to chat templates as
	// additional_special_tokens.
	AdditionalSpecialTokens []string
	// CleanUpTokenizationSpaces is recorded but never applied: Decode is exact.
	CleanUpTokenizationSpaces bool
	ModelMaxLength            int
	TokenizerClass            string
}

// chatTemplates are the folder's Jinja templates.
type chatTemplates struct {
	text    string            // the default template
	source  string            // where it came from, for error messages
	builtin bool              // text is the built-in Qwen2.5 template
	named   map[string]string // additional templates by name
}

// tokenString reads a special-token field, which is a string, null, or an
// AddedToken object {"content": ...}.
func tokenString(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("neither a string nor an object with \"content\"")
	}
	return *obj.Content, nil
}

func (t *Tokenizer) loadConfig(dir string) error {
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("tokenizer: %w", err)
	}
	if data != nil {
		if err := t.applyConfig(data, path); err != nil {
			return err
		}
	}
	return t.loadTemplateFiles(dir)
}

// applyConfig reads the bytes of a tokenizer_config.json; path names it in
// errors.
func (t *Tokenizer) applyConfig(data []byte, path string) error {
	var err error
	{
		t.configJSON = data
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			return fmt.Errorf("tokenizer: %s: %s", path, describeJSONError(data, err))
		}
		c := &t.config
		for field, dst := range map[string]*string{
			"bos_token": &c.BOSToken, "eos_token": &c.EOSToken, "pad_token": &c.PadToken, "unk_token": &c.UnkToken,
		} {
			if *dst, err = tokenString(raw[field]); err != nil {
				return fmt.Errorf("tokenizer: %s: %s: %v", path, field, err)
			}
			if *dst != "" {
				if _, ok := t.TokenID(*dst); !ok {
					return fmt.Errorf("tokenizer: %s: %s: %q is not a token of %s", path, field, *dst, t.source)
				}
			}
		}
		if v, ok := raw["additional_special_tokens"]; ok && !isNull(v) {
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return fmt.Errorf("tokenizer: %s: additional_special_tokens: not a list", path)
			}
			for i, item := range list {
				s, err := tokenString(item)
				if err != nil {
					return fmt.Errorf("tokenizer: %s: additional_special_tokens[%d]: %v", path, i, err)
				}
				c.AdditionalSpecialTokens = append(c.AdditionalSpecialTokens, s)
			}
		}
		for field, dst := range map[string]any{
			"clean_up_tokenization_spaces": &c.CleanUpTokenizationSpaces,
			"model_max_length":             &c.ModelMaxLength,
			"tokenizer_class":              &c.TokenizerClass,
		} {
			if v, ok := raw[field]; ok && !isNull(v) {
				if err := json.Unmarshal(v, dst); err != nil {
					// model_max_length is often 1e30 in old files: not an int.
					if field != "model_max_length" {
						return fmt.Errorf("tokenizer: %s: %s: %v", path, field, err)
					}
				}
			}
		}
		if v, ok := raw["chat_template"]; ok && !isNull(v) {
			if err := t.templates.parseConfigTemplate(v, path+": chat_template"); err != nil {
				return fmt.Errorf("tokenizer: %s: chat_template: %v", path, err)
			}
		}
	}
	return nil
}

// loadTemplateFiles reads chat_template.jinja and
// additional_chat_templates/*.jinja.
func (t *Tokenizer) loadTemplateFiles(dir string) error {
	// chat_template.jinja wins over the config key, as in transformers.
	jinja := filepath.Join(dir, "chat_template.jinja")
	if text, err := os.ReadFile(jinja); err == nil {
		t.templates.text, t.templates.source, t.templates.builtin = string(text), jinja, false
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tokenizer: %w", err)
	}
	extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	sort.Strings(extra)
	for _, path := range extra {
		text, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		if t.templates.named == nil {
			t.templates.named = map[string]string{}
		}
		t.templates.named[strings.TrimSuffix(filepath.Base(path), ".jinja")] = string(text)
	}
	return nil
}

// parseConfigTemplate reads "chat_template": a string, or a list of
// {"name", "template"} whose "default" entry is the default.
func (c *chatTemplates) parseConfigTemplate(raw json.RawMessage, source string) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.text, c.source, c.builtin = s, source, false
		return nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("neither a string nor a list of {name, template}")
	}
	for i, item := range list {
		if item.Name == nil || item.Template == nil {
			return fmt.Errorf("entry %d lacks name or template", i)
		}
		if *item.Name == "default" {
			c.text, c.source, c.builtin = *item.Template, fmt.Sprintf("%s[%d]", source, i), false
			continue
		}
		if c.named == nil {
			c.named = map[string]string{}
		}
		c.named[*item.Name] = *item.Template
	}
	return nil
}
