package env

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Tool is one function the model may call.
//
// Parameters is an OpenAI-style JSON schema kept as raw JSON, so the key
// order the author wrote reaches the chat template unchanged. Call gets
// arguments already validated against that schema; it returns an error for
// anything that went wrong (a dead server, a timeout), which the env turns
// into an "Error: ..." observation.
type Tool interface {
	Name() string
	Description() string
	Parameters() json.RawMessage
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool call produced.
type Result struct {
	Content string
	// Success is false for a call that ran but failed in the tool's own
	// terms (Agent-R1 tools report such failures as content).
	Success bool
	// Reward is an optional process reward for this call (Agent-R1 v0.1.0
	// tools return one); nil when the tool has no opinion.
	Reward *float64
	// Passages are the corpus ids of the passages a retrieval call
	// returned, in order: what the evidence process reward checks against
	// the question's evidence chain. nil for other tools, empty for a
	// retrieval that found nothing.
	Passages []string
}

// toolNameRe is OpenAI's rule for function names.
var toolNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// registeredTool is a Tool with its compiled schema and OpenAI wrapper.
type registeredTool struct {
	Tool
	schema  *jsonschema.Schema
	wrapped json.RawMessage // {"type":"function","function":{...}}
}

// Toolset is a validated, immutable set of tools; it is shared by every
// episode of an Env.
type Toolset struct {
	byName map[string]*registeredTool
	order  []*registeredTool
}

// NewToolset validates every tool: a legal unique name, a non-empty
// description, and a parameters schema of Agent-R1's shape
// {"type": "object", "properties": {...}, "required": [...]} with required
// a subset of properties, that also compiles as JSON Schema.
func NewToolset(tools ...Tool) (*Toolset, error) {
	ts := &Toolset{byName: map[string]*registeredTool{}}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("env: tool %d is nil", i)
		}
		rt, err := register(t)
		if err != nil {
			return nil, err
		}
		if _, dup := ts.byName[t.Name()]; dup {
			return nil, fmt.Errorf("env: tool %q registered twice", t.Name())
		}
		ts.byName[t.Name()] = rt
		ts.order = append(ts.order, rt)
	}
	return ts, nil
}

func register(t Tool) (*registeredTool, error) {
	name := t.Name()
	if !toolNameRe.MatchString(name) {
		return nil, fmt.Errorf("env: tool name %q: want 1-64 of [a-zA-Z0-9_-]", name)
	}
	if strings.TrimSpace(t.Description()) == "" {
		return nil, fmt.Errorf("env: tool %q: empty description", name)
	}
	params := t.Parameters()
	if err := checkSchemaShape(params); err != nil {
		return nil, fmt.Errorf("env: tool %q: parameters: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("env: tool %q: parameters: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://tool/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("env: tool %q: parameters: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("env: tool %q: parameters are not a valid JSON schema: %w", name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, params); err != nil {
		return nil, fmt.Errorf("env: tool %q: parameters: %w", name, err)
	}
	wrapped, err := json.Marshal(struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}{Type: "function", Function: struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}{name, t.Description(), compact.Bytes()}})
	if err != nil {
		return nil, fmt.Errorf("env: tool %q: %w", name, err)
	}
	return &registeredTool{Tool: t, schema: sch, wrapped: wrapped}, nil
}

// checkSchemaShape is Agent-R1's is_tool_schema: an object schema with a
// properties object and a required list naming only listed properties.
func checkSchemaShape(params json.RawMessage) error {
	var s struct {
		Type       *string                    `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   *[]string                  `json:"required"`
	}
	if err := json.Unmarshal(params, &s); err != nil {
		return fmt.Errorf("not a JSON object with type/properties/required: %w", err)
	}
	if s.Type == nil || *s.Type != "object" {
		return fmt.Errorf(`"type" must be "object"`)
	}
	if s.Properties == nil {
		return fmt.Errorf(`"properties" object missing`)
	}
	if s.Required == nil {
		return fmt.Errorf(`"required" list missing`)
	}
	for _, r := range *s.Required {
		if _, ok := s.Properties[r]; !ok {
			return fmt.Errorf("required %q is not a property", r)
		}
	}
	for name, p := range s.Properties {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p, &obj); err != nil {
			return fmt.Errorf("property %q: not an object", name)
		}
	}
	return nil
}

// Schemas returns the tools in registration order in OpenAI form,
// {"type":"function","function":{"name","description","parameters"}}.
func (ts *Toolset) Schemas() []json.RawMessage {
	out := make([]json.RawMessage, len(ts.order))
	for i, t := range ts.order {
		out[i] = append(json.RawMessage(nil), t.wrapped...)
	}
	return out
}

// Names lists the tool names, sorted.
func (ts *Toolset) Names() []string {
	names := make([]string, 0, len(ts.order))
	for _, t := range ts.order {
		names = append(names, t.Name())
	}
	sort.Strings(names)
	return names
}

// Lookup returns the tool registered under name.
func (ts *Toolset) Lookup(name string) (Tool, bool) {
	t, ok := ts.byName[name]
	if !ok {
		return nil, false
	}
	return t.Tool, true
}

// ValidateArgs checks arguments against the tool's schema.
func (ts *Toolset) ValidateArgs(name string, args json.RawMessage) error {
	t, ok := ts.byName[name]
	if !ok {
		return fmt.Errorf("env: unknown tool %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("env: tool %q arguments: %w", name, err)
	}
	if err := t.schema.Validate(inst); err != nil {
		return fmt.Errorf("env: tool %q arguments: %w", name, err)
	}
	return nil
}
