package data

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// ParquetStyle names the row layout WriteParquet produces.
type ParquetStyle string

const (
	// StyleSearchR1 is Search-R1's preprocessed layout (formats.md §3.5):
	// FlashRAG's id, question and golden_answers kept beside data_source,
	// prompt, ability, reward_model {style, ground_truth {target: [...]}}
	// and extra_info {split, index}.
	StyleSearchR1 ParquetStyle = "search-r1"
	// StyleAgentR1 is Agent-R1's legacy multi-hop layout (§3.6):
	// data_source, prompt, ability "multihop_qa", reward_model {style,
	// ground_truth: "answer"}, no extra_info, and the source's leftover
	// columns (here: id, question, and every Extra key as a string column).
	StyleAgentR1 ParquetStyle = "agent-r1"
)

// ParquetLayout says how WriteParquet lays rows out.
type ParquetLayout struct {
	Style ParquetStyle
	// ListItem names the list element "item", as pyarrow before 13 did,
	// instead of the spec's "element" that pyarrow >= 13 writes.
	ListItem bool
	// Split is extra_info.split in the Search-R1 style ("train" when empty).
	Split string
	// RowGroupRows caps the rows of one row group (Hugging Face datasets
	// writes large files in many groups); 0 leaves parquet-go's default.
	RowGroupRows int64
}

// The prompt texts the two projects build from a question.
const (
	// searchR1Instruction is Search-R1's "base" template; "as your want"
	// is verbatim.
	searchR1Instruction = "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. You can search as many times as your want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: "
	agentR1Instruction  = "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in <answer> </answer> tags."
)

// SearchR1Prompt is the user message Search-R1 builds for a question: the
// question stripped, with "?" appended when missing, after the base
// instruction.
func SearchR1Prompt(question string) string {
	q := strings.TrimSpace(question)
	if !strings.HasSuffix(q, "?") {
		q += "?"
	}
	return searchR1Instruction + q + "\n"
}

// AgentR1Prompt is the user message Agent-R1's legacy preprocessing builds:
// "Question: " + question + "\n" + instruction.
func AgentR1Prompt(question string) string {
	return "Question: " + question + "\n" + agentR1Instruction
}

// WriteParquet writes samples as a verl-style parquet file, laid out as
// pyarrow writes a Hugging Face dataset (snappy pages, 3-level LISTs,
// optional columns, a "huggingface" metadata entry), so Python trainers and
// r1go read the same file. A sample without a Prompt gets the style's
// default prompt. It is used to export the synthetic world and to make the
// parquet test fixtures.
func WriteParquet(out io.Writer, samples []Sample, layout ParquetLayout) error {
	elem := "element"
	if layout.ListItem {
		elem = "item"
	}
	split := layout.Split
	if split == "" {
		split = "train"
	}
	str := parquet.Optional(parquet.String())
	prompt := optList(elem, optGroup([]string{"role", "content"}, str, str))
	var root *pqGroup
	var extraKeys []string
	switch layout.Style {
	case StyleSearchR1:
		root = newGroup(false, false,
			[]string{"id", "question", "golden_answers", "data_source", "prompt", "ability", "reward_model", "extra_info"},
			str, str, optList(elem, str), str, prompt, str,
			optGroup([]string{"style", "ground_truth"}, str, optGroup([]string{"target"}, optList(elem, str))),
			optGroup([]string{"split", "index"}, str, parquet.Optional(parquet.Int(64))))
	case StyleAgentR1:
		seen := map[string]bool{}
		for _, s := range samples {
			for k := range s.Extra {
				if !seen[k] && !slices.Contains([]string{"id", "question", "data_source", "prompt", "ability", "reward_model"}, k) {
					seen[k] = true
					extraKeys = append(extraKeys, k)
				}
			}
		}
		slices.Sort(extraKeys)
		names := append([]string{"id", "question"}, extraKeys...)
		nodes := []parquet.Node{str, str}
		for range extraKeys {
			nodes = append(nodes, str)
		}
		names = append(names, "data_source", "prompt", "ability", "reward_model")
		nodes = append(nodes, str, prompt, str, optGroup([]string{"style", "ground_truth"}, str, str))
		root = newGroup(false, false, names, nodes...)
	default:
		return fmt.Errorf("data: unknown parquet style %q (want %q or %q)", layout.Style, StyleSearchR1, StyleAgentR1)
	}

	schema := parquet.NewSchema("schema", root)
	meta, err := hfFeatures(root)
	if err != nil {
		return err
	}
	options := []parquet.WriterOption{
		schema,
		parquet.Compression(&parquet.Snappy),
		parquet.KeyValueMetadata("huggingface", meta),
		parquet.CreatedBy("r1go", "0", "data.WriteParquet"),
	}
	if layout.RowGroupRows > 0 {
		options = append(options, parquet.MaxRowsPerRowGroup(layout.RowGroupRows))
	}
	w := parquet.NewWriter(out, options...)
	for i, s := range samples {
		msgs := s.Prompt
		if msgs == nil {
			content := SearchR1Prompt(s.Question)
			if layout.Style == StyleAgentR1 {
				content = AgentR1Prompt(s.Question)
			}
			msgs = []Message{{Role: "user", Content: content}}
		}
		promptValue := make([]any, len(msgs))
		for j, m := range msgs {
			promptValue[j] = map[string]any{"role": m.Role, "content": m.Content}
		}
		row := map[string]any{
			"id":          rawID(s),
			"question":    s.Question,
			"data_source": s.DataSource,
			"prompt":      promptValue,
		}
		switch layout.Style {
		case StyleSearchR1:
			row["golden_answers"] = stringsToAny(s.Answers)
			row["ability"] = "fact-reasoning"
			row["reward_model"] = map[string]any{"style": "rule", "ground_truth": map[string]any{"target": stringsToAny(s.Answers)}}
			row["extra_info"] = map[string]any{"split": split, "index": int64(i)}
		case StyleAgentR1:
			row["ability"] = "multihop_qa"
			var gt any // null for a sample without an answer (a test split)
			if len(s.Answers) > 0 {
				gt = s.Answers[0]
			}
			row["reward_model"] = map[string]any{"style": "rule", "ground_truth": gt}
			for _, k := range extraKeys {
				if v, ok := s.Extra[k]; ok {
					row[k] = v
				}
			}
		}
		var pr parquet.Row
		pr = shred(pr, root, row, 0, 0, 0, 0)
		// Shredding a list of structs interleaves their columns; a Row
		// holds each column's values together, in column order.
		slices.SortStableFunc(pr, func(a, b parquet.Value) int { return a.Column() - b.Column() })
		if _, err := w.WriteRows([]parquet.Row{pr}); err != nil {
			return fmt.Errorf("data: WriteParquet: row %d: %w", i, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("data: WriteParquet: %w", err)
	}
	return nil
}

// rawID is the sample's id without its "data_source:" namespace.
func rawID(s Sample) string {
	return strings.TrimPrefix(s.ID, s.DataSource+":")
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// pqGroup is a parquet group whose fields keep the order they were given
// in; parquet.Group sorts them by name, pyarrow keeps the dataset's order.
// With list set it carries the LIST logical type, so the element name can
// be chosen ("element" or the legacy "item").
type pqGroup struct {
	names    []string
	nodes    []parquet.Node
	list     bool // LIST logical type
	wrapper  bool // a LIST group or its repeated group: one child that takes the value as is
	optional bool
	repeated bool
}

func newGroup(optional, repeated bool, names []string, nodes ...parquet.Node) *pqGroup {
	if len(names) != len(nodes) {
		panic("data: newGroup: names and nodes differ in length") // programmer's mistake
	}
	return &pqGroup{names: names, nodes: nodes, optional: optional, repeated: repeated}
}

func optGroup(names []string, nodes ...parquet.Node) *pqGroup {
	return newGroup(true, false, names, nodes...)
}

// optList is pyarrow's nullable list: optional group (LIST) { repeated
// group list { <elem> } }, the element itself optional.
func optList(elemName string, elem parquet.Node) *pqGroup {
	repeated := newGroup(false, true, []string{elemName}, elem)
	repeated.wrapper = true
	g := newGroup(true, false, []string{"list"}, repeated)
	g.list, g.wrapper = true, true
	return g
}

func (g *pqGroup) ID() int { return 0 }
func (g *pqGroup) String() string {
	return "group(" + strings.Join(g.names, ", ") + ")"
}
func (g *pqGroup) Type() parquet.Type {
	if g.list {
		return parquet.List(parquet.String()).Type()
	}
	return parquet.Group{}.Type()
}
func (g *pqGroup) Optional() bool              { return g.optional }
func (g *pqGroup) Repeated() bool              { return g.repeated }
func (g *pqGroup) Required() bool              { return !g.optional && !g.repeated }
func (g *pqGroup) Leaf() bool                  { return false }
func (g *pqGroup) Encoding() encoding.Encoding { return nil }
func (g *pqGroup) Compression() compress.Codec { return nil }
func (g *pqGroup) GoType() reflect.Type        { return reflect.TypeFor[map[string]any]() }
func (g *pqGroup) Fields() []parquet.Field {
	fields := make([]parquet.Field, len(g.names))
	for i := range g.names {
		fields[i] = pqField{g.nodes[i], g.names[i]}
	}
	return fields
}

type pqField struct {
	parquet.Node
	name string
}

func (f pqField) Name() string { return f.name }
func (f pqField) Value(base reflect.Value) reflect.Value {
	return base.MapIndex(reflect.ValueOf(f.name))
}

func unwrapField(f parquet.Field) parquet.Node {
	if pf, ok := f.(pqField); ok {
		return pf.Node
	}
	return f
}

// numLeaves counts the leaf columns under node.
func numLeaves(node parquet.Node) int {
	if node.Leaf() {
		return 1
	}
	n := 0
	for _, f := range node.Fields() {
		n += numLeaves(unwrapField(f))
	}
	return n
}

// shred appends to row the leaf values of v under node, with Dremel
// repetition and definition levels: col is the index of node's first leaf
// column (columns are numbered depth first, the order parquet stores them
// in), rep the level a first value repeats at, def the definition level of
// the enclosing value, repDepth the number of repeated ancestors.
func shred(row parquet.Row, node parquet.Node, v any, col, rep, def, repDepth int) parquet.Row {
	if node.Optional() {
		if v == nil {
			return nulls(row, node, col, rep, def)
		}
		def++
	}
	if node.Repeated() {
		items, _ := v.([]any)
		if len(items) == 0 {
			return nulls(row, node, col, rep, def)
		}
		repDepth++
		for i, item := range items {
			r := rep
			if i > 0 {
				r = repDepth
			}
			row = shredValue(row, node, item, col, r, def+1, repDepth)
		}
		return row
	}
	return shredValue(row, node, v, col, rep, def, repDepth)
}

// shredValue writes one present (non-repeated) value of node.
func shredValue(row parquet.Row, node parquet.Node, v any, col, rep, def, repDepth int) parquet.Row {
	if node.Leaf() {
		var val parquet.Value
		switch x := v.(type) {
		case string:
			val = parquet.ByteArrayValue([]byte(x))
		case int64:
			val = parquet.Int64Value(x)
		default:
			panic(fmt.Sprintf("data: shred: unsupported leaf value %T", v)) // programmer's mistake
		}
		return append(row, val.Level(rep, def, col))
	}
	if g, ok := node.(*pqGroup); ok && g.wrapper {
		// The LIST group and its repeated "list" group only wrap the
		// element: the value passes through to their single child.
		return shred(row, g.nodes[0], v, col, rep, def, repDepth)
	}
	m, _ := v.(map[string]any)
	for _, f := range node.Fields() {
		child := unwrapField(f)
		var cv any
		if m != nil {
			cv = m[f.Name()]
		}
		// Levels are per column: every column starts its share of this
		// value at rep.
		row = shred(row, child, cv, col, rep, def, repDepth)
		col += numLeaves(child)
	}
	return row
}

// nulls writes one null per leaf under node at the given levels.
func nulls(row parquet.Row, node parquet.Node, col, rep, def int) parquet.Row {
	if node.Leaf() {
		return append(row, parquet.Value{}.Level(rep, def, col))
	}
	for _, f := range node.Fields() {
		child := unwrapField(f)
		row = nulls(row, child, col, rep, def)
		col += numLeaves(child)
	}
	return row
}

// hfFeatures renders the "huggingface" metadata entry that datasets writes:
// {"info": {"features": ...}} with Value/Sequence types per column.
func hfFeatures(root *pqGroup) (string, error) {
	var feature func(n parquet.Node) any
	feature = func(n parquet.Node) any {
		if n.Leaf() {
			dtype := "string"
			if n.Type().Kind() == parquet.Int64 {
				dtype = "int64"
			}
			return map[string]any{"dtype": dtype, "_type": "Value"}
		}
		g := n.(*pqGroup)
		if g.list {
			elem := unwrapField(g.nodes[0].Fields()[0])
			if eg, ok := elem.(*pqGroup); ok && !eg.list {
				return []any{feature(eg)} // a list of structs is a one-item list
			}
			return map[string]any{"feature": feature(elem), "_type": "Sequence"}
		}
		fields := make(orderedJSON, len(g.names))
		for i, name := range g.names {
			fields[i] = keyValue{name, feature(g.nodes[i])}
		}
		return fields
	}
	b, err := json.Marshal(map[string]any{"info": map[string]any{"features": feature(root)}})
	if err != nil {
		return "", fmt.Errorf("data: WriteParquet: metadata: %w", err)
	}
	return string(b), nil
}

type keyValue struct {
	key   string
	value any
}

// orderedJSON marshals as a JSON object that keeps its key order.
type orderedJSON []keyValue

func (o orderedJSON) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(kv.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(kv.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}
