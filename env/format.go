package env

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Markup is the chat markup the env writes around observations and reads
// assistant blocks with. Qwen's ChatML is the default.
type Markup struct {
	AssistantStart string // opens an assistant turn: "<|im_start|>assistant\n"
	UserStart      string // opens a user turn: "<|im_start|>user\n"
	TurnEnd        string // closes any turn: "<|im_end|>"
	CallStart      string // "<tool_call>"
	CallEnd        string // "</tool_call>"
	ResponseStart  string // "<tool_response>"
	ResponseEnd    string // "</tool_response>"
}

// QwenMarkup is Qwen2/2.5's ChatML with Hermes tool tags.
func QwenMarkup() Markup {
	return Markup{
		AssistantStart: "<|im_start|>assistant\n",
		UserStart:      "<|im_start|>user\n",
		TurnEnd:        "<|im_end|>",
		CallStart:      "<tool_call>",
		CallEnd:        "</tool_call>",
		ResponseStart:  "<tool_response>",
		ResponseEnd:    "</tool_response>",
	}
}

// AssistantBlocks cuts the text of every complete assistant turn out of a
// transcript, as Agent-R1's findall(r"<|im_start|>assistant\n(.*?)<|im_end|>")
// does: an unterminated last turn is not a block.
func (m Markup) AssistantBlocks(text string) []string {
	var blocks []string
	for {
		i := strings.Index(text, m.AssistantStart)
		if i < 0 {
			return blocks
		}
		text = text[i+len(m.AssistantStart):]
		j := strings.Index(text, m.TurnEnd)
		if j < 0 {
			return blocks
		}
		blocks = append(blocks, text[:j])
		text = text[j+len(m.TurnEnd):]
	}
}

// ErrorKind classifies why a tool call produced an error observation.
type ErrorKind string

const (
	ErrNone             ErrorKind = ""
	ErrJSON             ErrorKind = "json"              // the call body is not JSON
	ErrNoName           ErrorKind = "no-name"           // no "name" key (or not an object)
	ErrNoArguments      ErrorKind = "no-arguments"      // no "arguments" key
	ErrUnknownTool      ErrorKind = "unknown-tool"      // name not registered
	ErrInvalidArguments ErrorKind = "invalid-arguments" // arguments fail the schema
	ErrTool             ErrorKind = "tool"              // the tool returned an error
	ErrTimeout          ErrorKind = "timeout"           // the call ran past its deadline
	ErrPanic            ErrorKind = "panic"             // the tool panicked
)

// agentR1Errors are the observation texts Agent-R1's NousToolEnv returns.
var agentR1Errors = map[ErrorKind]string{
	ErrJSON:             "Error: JSONDecodeError",
	ErrNoName:           "Error: No tool name",
	ErrNoArguments:      "Error: No tool arguments",
	ErrUnknownTool:      "Error: ToolNotFoundError",
	ErrInvalidArguments: "Error: Invalid tool arguments",
}

// ToolCall is one <tool_call> body of a model turn, parsed.
type ToolCall struct {
	Raw       string          // the text between the tags
	Name      string          // empty unless the body had a string "name"
	Arguments json.RawMessage // nil unless the body had "arguments"
	Err       ErrorKind       // ErrJSON, ErrNoName, ErrNoArguments or ErrUnknownTool; ErrNone when well formed
}

// ParseToolCalls finds every complete <tool_call>...</tool_call> in a turn
// (Agent-R1's non-greedy DOTALL regex) and parses each body as JSON with
// keys "name" and "arguments", checked in Agent-R1's order (name, then
// arguments, then the tool). A body that is not an object counts as having
// no name; a name that is not a string names an unknown tool.
func (m Markup) ParseToolCalls(turn string) []ToolCall {
	var calls []ToolCall
	for {
		i := strings.Index(turn, m.CallStart)
		if i < 0 {
			return calls
		}
		turn = turn[i+len(m.CallStart):]
		j := strings.Index(turn, m.CallEnd)
		if j < 0 {
			return calls
		}
		calls = append(calls, parseCallBody(turn[:j]))
		turn = turn[j+len(m.CallEnd):]
	}
}

func parseCallBody(body string) ToolCall {
	c := ToolCall{Raw: body}
	if !json.Valid([]byte(body)) {
		c.Err = ErrJSON
		return c
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &obj); err != nil {
		c.Err = ErrNoName
		return c
	}
	rawName, ok := obj["name"]
	if !ok {
		c.Err = ErrNoName
		return c
	}
	args, ok := obj["arguments"]
	if !ok {
		c.Err = ErrNoArguments
		return c
	}
	if json.Unmarshal(rawName, &c.Name) != nil {
		// a name that is not a string names no tool, as in Python where
		// the lookup in the tool map simply fails
		c.Name, c.Err = "", ErrUnknownTool
		return c
	}
	c.Arguments = args
	return c
}

// TruncateSide says which part of an over-long tool response is kept.
type TruncateSide string

const (
	// TruncateAgentR1 keeps the first N characters and appends "..."
	// (Agent-R1's NousToolEnv).
	TruncateAgentR1 TruncateSide = "agent-r1"
	// TruncateLeft, TruncateRight and TruncateMiddle follow verl's
	// tool_response_truncate_side: keep the head, the tail, or both halves.
	TruncateLeft   TruncateSide = "left"
	TruncateRight  TruncateSide = "right"
	TruncateMiddle TruncateSide = "middle"
)

// Truncate cuts s to at most n characters (code points, as Python counts)
// in the given style; n <= 0 means no limit.
func Truncate(s string, n int, side TruncateSide) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	head := func(k int) string {
		i := 0
		for pos := range s {
			if i == k {
				return s[:pos]
			}
			i++
		}
		return s
	}
	tail := func(k int) string {
		i := len(s)
		for c := 0; c < k && i > 0; c++ {
			_, size := utf8.DecodeLastRuneInString(s[:i])
			i -= size
		}
		return s[i:]
	}
	switch side {
	case TruncateLeft:
		return head(n) + "...(truncated)"
	case TruncateRight:
		return "(truncated)..." + tail(n)
	case TruncateMiddle:
		return head(n/2) + "...(truncated)..." + tail(n/2)
	default:
		return head(n) + "..."
	}
}

// pyJSONString writes s as Python's json.dumps(s, ensure_ascii=False) does:
// only the quote, the backslash and control characters are escaped, and
// non-ASCII (including U+2028) stays raw; Go's encoder would escape <, >, &.
func pyJSONString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 becomes U+FFFD
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
