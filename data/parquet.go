package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// parquetBatch is how many rows one read decodes; rows are handed on one by
// one, so memory stays bounded by a batch, not the file.
const parquetBatch = 256

// columns a verl-style file uses for the sample itself; any other column
// goes to Extra, except the paragraphs a Hugging Face copy of HotpotQA or
// MuSiQue carries, which are dropped as the JSON loaders drop them.
var parquetOwnColumns = []string{"data_source", "prompt", "question", "id", "reward_model", "golden_answers", "answer", "answers", "answer_aliases",
	"extra_info", "ability", "context", "paragraphs"}

// streamParquet reads a verl / Search-R1 / Agent-R1 parquet file row by
// row. parquet-go panics on some corrupt pages; those panics become errors
// naming the file, so bad input never crashes the caller.
func streamParquet(f io.ReaderAt, size int64, name string, opt LoadOptions, fn func(Sample) error) (rep Report, err error) {
	rep = Report{File: name, Format: FormatParquet}
	defer func() {
		if p := recover(); p != nil {
			err = &LoadError{File: name, Err: fmt.Errorf("corrupt parquet file: %v", p)}
		}
	}()
	if opt.DataSource != "" && !opt.knownSource(opt.DataSource) {
		return rep, fmt.Errorf("data: %s: data.data_source: %w %q (known: %s)", name, ErrUnknownSource, opt.DataSource, sourceList())
	}
	if err := checkParquet(f, size); err != nil {
		return rep, &LoadError{File: name, Err: fmt.Errorf("not a readable parquet file: %w", err)}
	}
	pf, err := parquet.OpenFile(f, size)
	if err != nil {
		return rep, &LoadError{File: name, Err: fmt.Errorf("not a readable parquet file: %w", err)}
	}
	schema := pf.Schema()
	has := func(col string) bool { _, ok := schema.Lookup(col); return ok || hasGroup(schema, col) }
	if !has("prompt") && !has("question") {
		return rep, &LoadError{File: name, Err: errors.New("has neither a prompt nor a question column")}
	}
	if !has("data_source") && opt.DataSource == "" {
		return rep, &LoadError{File: name, Field: "data_source", Err: errors.New("no data_source column: set data.data_source")}
	}
	if c := opt.AnswerColumn; c != "" && !has(c) {
		return rep, &LoadError{File: name, Field: c, Err: errors.New("no such column, but data.answer_column names it")}
	}
	ld := &loader{name: name, opt: opt, rep: &rep, fn: fn, ids: map[string]string{}}
	reader := parquet.NewGenericReader[any](pf)
	defer reader.Close()
	rows := make([]any, parquetBatch)
	rowNo := 0
	for {
		n, rerr := reader.Read(rows)
		for _, row := range rows[:n] {
			rowNo++
			rep.Records++
			where := &LoadError{File: name, Row: rowNo}
			m, _ := row.(map[string]any)
			s, ferr := decodeParquetRow(m, rowNo, opt)
			if ferr != nil {
				where.Field, where.Err = ferr.field, ferr.err
				if e := ld.bad(where); e != nil {
					return rep, e
				}
				continue
			}
			if e := ld.deliver(s, where); e != nil {
				if errors.Is(e, ErrStop) {
					return rep, nil
				}
				return rep, e
			}
		}
		clear(rows[:n])
		if rerr == io.EOF {
			return rep, nil
		}
		if rerr != nil {
			return rep, &LoadError{File: name, Row: rowNo + 1, Err: fmt.Errorf("reading rows: %w", rerr)}
		}
		if n == 0 {
			return rep, nil
		}
	}
}

// hasGroup reports whether the schema has a top-level field called name
// (Lookup finds only leaf columns).
func hasGroup(schema *parquet.Schema, name string) bool {
	for _, f := range schema.Fields() {
		if f.Name() == name {
			return true
		}
	}
	return false
}

// decodeParquetRow turns one row, as parquet-go reconstructs it into maps
// and slices, into a Sample.
func decodeParquetRow(row map[string]any, rowNo int, opt LoadOptions) (Sample, *fieldError) {
	var s Sample
	source, err := rowString(row, "data_source")
	if err != nil {
		return s, err
	}
	if source == "" {
		source = opt.DataSource
	}
	if source == "" {
		return s, missing("data_source")
	}
	if !opt.knownSource(source) {
		return s, &fieldError{"data_source", fmt.Errorf("%w %q (known: %s; add it with LoadOptions.ExtraSources)", ErrUnknownSource, source, sourceList())}
	}
	s.DataSource = source
	s.Extra = map[string]string{}

	if s.Prompt, err = rowPrompt(row["prompt"], opt.PromptJSON); err != nil {
		return s, err
	}
	q, err := rowString(row, "question")
	if err != nil {
		return s, err
	}
	if strings.TrimSpace(q) == "" {
		q = questionFromPrompt(s.Prompt)
	}
	if s.Question = strings.TrimSpace(q); s.Question == "" {
		if row["prompt"] == nil {
			return s, missing("question")
		}
		return s, fieldErr("prompt", "holds no user message to take the question from")
	}

	answerField := ""
	if s.Answers, answerField, err = rowAnswers(row, opt); err != nil {
		return s, err
	}
	if len(s.Answers) == 0 && !opt.AllowUnanswered {
		return s, missing(answerField)
	}

	id, err := rowID(row, rowNo)
	if err != nil {
		return s, err
	}
	s.ID = source + ":" + id
	s.Extra["id"] = id
	if v, _ := rowString(row, "ability"); v != "" {
		s.Extra["ability"] = v
	}
	if rm, ok := row["reward_model"].(map[string]any); ok {
		if v, ok := rm["style"].(string); ok {
			s.Extra["style"] = v
		}
	}
	if ei, ok := row["extra_info"].(map[string]any); ok {
		for k, v := range ei {
			if v != nil {
				s.Extra[k] = scalarOrJSON(v)
			}
		}
	}
	for k, v := range row {
		if v != nil && !slices.Contains(parquetOwnColumns, k) {
			s.Extra[k] = scalarOrJSON(v)
		}
	}
	return s, nil
}

// rowString reads a top-level string column; absent or null gives "".
func rowString(row map[string]any, col string) (string, *fieldError) {
	switch v := row[col].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	default:
		return "", fieldErr(col, "want a string, found %T", v)
	}
}

// rowPrompt reads the prompt column: a list of {role, content} messages,
// as verl, Search-R1 and Agent-R1 write it. A string is an error (it is
// usually a file whose prompt was saved as text by mistake, and taking it
// as a user message would train on the JSON or template markup itself),
// unless promptJSON asks to parse it as a JSON list of messages
// (data.prompt_json).
func rowPrompt(v any, promptJSON bool) ([]Message, *fieldError) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case string, []byte:
		text := scalarOrJSON(p)
		if !promptJSON {
			return nil, fieldErr("prompt", "is a string (%.60q), want a list of {role, content} messages; set data.prompt_json=true if it holds them as JSON text", text)
		}
		var msgs []struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		}
		if err := json.Unmarshal([]byte(text), &msgs); err != nil {
			return nil, fieldErr("prompt", "data.prompt_json: not a JSON list of {role, content} messages: %v", err)
		}
		out := make([]Message, len(msgs))
		for i, m := range msgs {
			field := "prompt[" + strconv.Itoa(i) + "]"
			if m.Role == nil {
				return nil, fieldErr(field+".role", "missing")
			}
			if m.Content == nil {
				return nil, fieldErr(field+".content", "missing")
			}
			out[i] = Message{Role: *m.Role, Content: *m.Content}
		}
		return out, nil
	case []any:
		msgs := make([]Message, 0, len(p))
		for i, item := range p {
			m, ok := item.(map[string]any)
			field := "prompt[" + strconv.Itoa(i) + "]"
			if !ok {
				return nil, fieldErr(field, "want a {role, content} message, found %T", item)
			}
			role, ok1 := m["role"].(string)
			content, ok2 := m["content"].(string)
			if !ok1 {
				return nil, fieldErr(field+".role", "want a string, found %T", m["role"])
			}
			if !ok2 {
				return nil, fieldErr(field+".content", "want a string, found %T", m["content"])
			}
			msgs = append(msgs, Message{Role: role, Content: content})
		}
		return msgs, nil
	default:
		return nil, fieldErr("prompt", "want a list of messages, found %T", v)
	}
}

// questionFromPrompt recovers the bare question from the last user
// message: Search-R1 ends it with "Question: <q>\n", Agent-R1 starts it
// with "Question: <q>\n<instruction>". Without that marker the whole
// message is the question.
func questionFromPrompt(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		c := msgs[i].Content
		if at := strings.LastIndex(c, "Question: "); at >= 0 {
			q, _, _ := strings.Cut(c[at+len("Question: "):], "\n")
			return q
		}
		return c
	}
	return ""
}

// rowAnswers reads the gold answers, and names the field they were looked
// for in: reward_model.ground_truth as a string, a list, or {target: string
// or list}. A row without reward_model, or with a null ground_truth, is
// bad: the answers come from another column (FlashRAG's golden_answers,
// answers, or answer with its answer_aliases) only when
// LoadOptions.AnswerColumn (data.answer_column) names it, so a file that
// lost its reward column is never scored against a column nobody chose.
func rowAnswers(row map[string]any, opt LoadOptions) ([]string, string, *fieldError) {
	rm, isMap := row["reward_model"].(map[string]any)
	switch {
	case row["reward_model"] != nil && !isMap:
		return nil, "reward_model", fieldErr("reward_model", "want a struct, found %T", row["reward_model"])
	case isMap && rm["ground_truth"] != nil:
		gt := rm["ground_truth"]
		field := "reward_model.ground_truth"
		if m, ok := gt.(map[string]any); ok {
			gt, field = m["target"], field+".target"
			if gt == nil {
				return nil, field, nil
			}
		}
		answers, err := anyStrings(gt, field)
		return uniqueNonBlank(answers), field, err
	}
	col := opt.AnswerColumn
	if col == "" {
		if isMap && opt.AllowUnanswered {
			return nil, "reward_model.ground_truth", nil
		}
		if isMap {
			return nil, "reward_model.ground_truth", fieldErr("reward_model.ground_truth", "null (set data.answer_column to take the answers from another column)")
		}
		return nil, "reward_model", fieldErr("reward_model", "missing (set data.answer_column to take the answers from another column)")
	}
	v := row[col]
	if v == nil {
		return nil, col, nil
	}
	answers, err := anyStrings(v, col)
	if err != nil {
		return nil, col, err
	}
	if aliases := row["answer_aliases"]; col == "answer" && aliases != nil {
		// MuSiQue on the Hugging Face hub (bdsaglam/musique).
		more, err := anyStrings(aliases, "answer_aliases")
		if err != nil {
			return nil, "answer_aliases", err
		}
		answers = append(answers, more...)
	}
	return uniqueNonBlank(answers), col, nil
}

// anyStrings reads a string or a list of strings (numbers kept as
// written).
func anyStrings(v any, field string) ([]string, *fieldError) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, it := range x {
			switch s := it.(type) {
			case string:
				out = append(out, s)
			case int32, int64, float32, float64:
				out = append(out, fmt.Sprint(s))
			default:
				return nil, fieldErr(field+"["+strconv.Itoa(i)+"]", "want a string, found %T", it)
			}
		}
		return out, nil
	default:
		return nil, fieldErr(field, "want a string or a list of strings, found %T", v)
	}
}

// rowID picks the record's own id: the id column (FlashRAG's, kept by
// Search-R1), else extra_info.index, else the 1-based row number.
func rowID(row map[string]any, rowNo int) (string, *fieldError) {
	switch v := row["id"].(type) {
	case string:
		if strings.TrimSpace(v) != "" {
			return v, nil
		}
	case int32, int64:
		return fmt.Sprint(v), nil
	case nil:
	default:
		return "", fieldErr("id", "want a string or an integer, found %T", v)
	}
	if ei, ok := row["extra_info"].(map[string]any); ok {
		switch v := ei["index"].(type) {
		case int32, int64:
			return fmt.Sprint(v), nil
		case string:
			return v, nil
		}
	}
	return "row" + strconv.Itoa(rowNo), nil
}

// scalarOrJSON renders a leftover column for Extra: scalars as text,
// nested values as JSON with sorted keys.
func scalarOrJSON(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case bool, int32, int64, float32, float64:
		return fmt.Sprint(x)
	}
	b, err := json.Marshal(v) // map keys come out sorted

	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
