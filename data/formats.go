package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// chooseDecoder fixes the record decoder of a JSON or JSONL file, from
// LoadOptions.Format or, in auto mode, from the fields of its first record
// that is a JSON object. The array/lines split was made on the first byte.
func (l *loader) chooseDecoder(first record) error {
	format := l.opt.Format
	if format == FormatAuto {
		switch {
		case first.has("_id") && (first.has("evidences") || first.has("entity_ids")):
			format = Format2Wiki
		case first.has("_id"):
			format = FormatHotpotQA
		case first.has("golden_answers"):
			format = FormatFlashRAG
		case first.has("question_decomposition") || first.has("answer_aliases") || first.has("paragraphs"):
			format = FormatMuSiQue
		default:
			keys := make([]string, 0, len(first))
			for k := range first {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return fmt.Errorf("cannot tell the dataset format from the fields %v (set the dataset format)", keys)
		}
	}
	source := l.opt.DataSource
	if source == "" {
		switch format {
		case FormatFlashRAG:
			if l.dirSource == "" {
				return errNeedSource
			}
			source = l.dirSource
		default:
			source = string(format)
		}
	}
	l.rep.Format = format
	switch format {
	case FormatHotpotQA, Format2Wiki:
		l.decode = func(r record) (Sample, *fieldError) {
			return decodeHotpotStyle(r, source, format == Format2Wiki, l.opt.AllowUnanswered)
		}
	case FormatMuSiQue:
		l.decode = func(r record) (Sample, *fieldError) { return decodeMuSiQue(r, source, l.opt.AllowUnanswered) }
	case FormatFlashRAG:
		l.decode = func(r record) (Sample, *fieldError) { return decodeFlashRAG(r, source, l.opt.AllowUnanswered) }
	default:
		return fmt.Errorf("format %s is not a JSON format", format)
	}
	return nil
}

// errNeedSource: a FlashRAG file whose data_source nothing names.
var errNeedSource = errors.New("FlashRAG records carry no data_source, and neither the folder nor the file name is a known one: set data.data_source")

// common reads the fields every JSON format shares under its own names.
func common(r record, source, idField string) (Sample, *fieldError) {
	id, err := r.id(idField)
	if err != nil {
		return Sample{}, err
	}
	q, err := r.required("question")
	if err != nil {
		return Sample{}, err
	}
	return Sample{
		ID:         source + ":" + id,
		DataSource: source,
		Question:   strings.TrimSpace(q),
		Extra:      map[string]string{"id": id},
	}, nil
}

// decodeHotpotStyle reads a HotpotQA or 2WikiMultihopQA array element.
func decodeHotpotStyle(r record, source string, twoWiki, allowUnanswered bool) (Sample, *fieldError) {
	s, err := common(r, source, "_id")
	if err != nil {
		return s, err
	}
	answer, err := r.str("answer")
	if err != nil {
		return s, err
	}
	if strings.TrimSpace(answer) != "" {
		s.Answers = []string{answer}
	} else if !allowUnanswered {
		return s, missing("answer")
	}
	fields := []string{"type", "level"}
	if twoWiki {
		fields = []string{"type", "entity_ids", "answer_id"}
	}
	for _, f := range fields {
		v, err := r.str(f)
		if err != nil {
			return s, err
		}
		if v != "" {
			s.Extra[f] = v
		}
	}
	// Small structured fields stay as compact JSON; the context paragraphs
	// are not kept (see the package doc).
	for _, f := range []string{"supporting_facts", "evidences"} {
		if v := r.compact(f); v != "" {
			s.Extra[f] = v
		}
	}
	return s, nil
}

// decodeMuSiQue reads a MuSiQue line. The answers are the answer and its
// aliases; the number of hops is the length of question_decomposition.
func decodeMuSiQue(r record, source string, allowUnanswered bool) (Sample, *fieldError) {
	s, err := common(r, source, "id")
	if err != nil {
		return s, err
	}
	answer, err := r.str("answer")
	if err != nil {
		return s, err
	}
	aliases, err := r.strs("answer_aliases")
	if err != nil {
		return s, err
	}
	s.Answers = uniqueNonBlank(append([]string{answer}, aliases...))
	if len(s.Answers) == 0 && !allowUnanswered {
		return s, missing("answer")
	}
	if r.has("answerable") {
		var ok bool
		if json.Unmarshal(r["answerable"], &ok) != nil {
			return s, fieldErr("answerable", "want a boolean, found %s", kindOf(r["answerable"]))
		}
		s.Extra["answerable"] = strconv.FormatBool(ok)
	}
	if r.has("question_decomposition") {
		dec := json.NewDecoder(bytes.NewReader(r["question_decomposition"]))
		dec.UseNumber()
		var steps []any
		if dec.Decode(&steps) != nil {
			return s, fieldErr("question_decomposition", "want a list, found %s", kindOf(r["question_decomposition"]))
		}
		s.Extra["hops"] = strconv.Itoa(len(steps))
		s.Extra["question_decomposition"] = compactJSON(steps)
	}
	return s, nil
}

// decodeFlashRAG reads a FlashRAG line: id, question, golden_answers and
// the dataset-specific metadata, kept as compact JSON.
func decodeFlashRAG(r record, source string, allowUnanswered bool) (Sample, *fieldError) {
	s, err := common(r, source, "id")
	if err != nil {
		return s, err
	}
	answers, err := r.strs("golden_answers")
	if err != nil {
		return s, err
	}
	s.Answers = uniqueNonBlank(answers)
	if len(s.Answers) == 0 && !allowUnanswered {
		return s, missing("golden_answers")
	}
	if m := r.compact("metadata"); m != "" {
		s.Extra["metadata"] = m
	}
	return s, nil
}

// uniqueNonBlank drops blank and repeated answers, keeping the order.
func uniqueNonBlank(answers []string) []string {
	var out []string
	for _, a := range answers {
		if strings.TrimSpace(a) != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
