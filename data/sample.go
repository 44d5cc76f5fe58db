package data

import (
	"encoding/json"
	"strings"
)

// Message is one chat message of a prompt as the parquet files of
// verl, Search-R1 and Agent-R1 store it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Sample is one question with its gold answers.
type Sample struct {
	ID         string    // unique within a loaded set; "data_source:id" where sources share ids
	DataSource string    // "hotpotqa", "2wikimultihopqa", "musique", "synthetic", ...
	Question   string    // the bare question, without instructions
	Answers    []string  // gold answers; EM matches any of them
	Prompt     []Message // the chat prompt when the file carries one (parquet); nil otherwise
	Extra      map[string]string

	// Gold is the gold tool-use trajectory when the source knows one (the
	// synthetic world does; the public datasets do not): nil otherwise.
	// The SFT warm start renders it into chat turns.
	Gold *Trajectory
}

// Trajectory is a gold tool-use solution of a question: search steps in
// order, then the final answer. It is data, not rendered text, so the
// rollout and SFT code can render it in whatever tool-call format the chat
// template uses; Turns renders the Hermes/Qwen form.
type Trajectory struct {
	Steps        []Step
	FinalThought string // the reasoning of the last turn, before the answer
	Answer       string // the text that goes inside <answer></answer>
}

// Step is one assistant turn that calls the search tool.
type Step struct {
	Thought string // the text inside <think></think>
	Query   string // the search query, the "query" argument of the tool call
	// Evidence is the id of the corpus passage that answers this step's
	// query, and Found the entity that passage names; together they let a
	// test check that the search tool really returns what the next step uses.
	Evidence string
	Found    string
}

// SearchTool is the tool name the gold trajectories call.
const SearchTool = "search"

// Turns renders the trajectory as the assistant turns of a Hermes/Qwen
// tool-calling conversation: one turn per step,
//
//	<think>thought</think>
//	<tool_call>
//	{"name": "search", "arguments": {"query": "..."}}
//	</tool_call>
//
// and a final "<think>thought</think>\n<answer>answer</answer>". The tool
// responses that sit between the turns come from the environment.
func (t *Trajectory) Turns() []string { return t.Render("<think>") }

// Render is Turns with another opening of the think block, e.g.
// "<think>\n" to match an environment that pre-fills "<think>\n" at the
// start of each turn (Agent-R1 does): the caller then trains on each turn
// after the pre-filled prefix.
func (t *Trajectory) Render(thinkOpen string) []string {
	turns := make([]string, 0, len(t.Steps)+1)
	for _, s := range t.Steps {
		turns = append(turns, thinkOpen+s.Thought+"</think>\n<tool_call>\n"+ToolCallJSON(SearchTool, "query", s.Query)+"\n</tool_call>")
	}
	return append(turns, thinkOpen+t.FinalThought+"</think>\n<answer>"+t.Answer+"</answer>")
}

// ToolCallJSON writes a one-argument tool call the way Qwen2.5's chat
// template prints one ({"name": ..., "arguments": {...}} with Python
// json.dumps spacing and no HTML escaping).
func ToolCallJSON(name, arg, value string) string {
	var b strings.Builder
	b.WriteString(`{"name": `)
	b.WriteString(pyQuote(name))
	b.WriteString(`, "arguments": {`)
	b.WriteString(pyQuote(arg))
	b.WriteString(`: `)
	b.WriteString(pyQuote(value))
	b.WriteString(`}}`)
	return b.String()
}

// pyQuote quotes s as Python's json.dumps(ensure_ascii=False), which the
// Hugging Face tojson filter calls, does: Go's encoder without HTML escaping
// agrees on printable text; U+2028 and U+2029, which Go escapes and Python
// leaves raw, are put back.
func pyQuote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	out = strings.ReplaceAll(out, `\u2028`, "\u2028")
	return strings.ReplaceAll(out, `\u2029`, "\u2029")
}
