package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"unicode/utf8"
)

// JSONL appends one JSON object per step to a file:
//
//	{"step":12,"data":{"actor/entropy":0.4375,"critic/score/mean":0.25}}
//
// The nested shape keeps the step apart from metric names (a metric may be
// called anything, "step" included). Keys are sorted; finite numbers are
// written as FormatNumber writes them, which is valid JSON; NaN, +Inf and
// -Inf, which JSON cannot hold, are the strings "NaN", "Infinity" and
// "-Infinity" (pandas and Python's json read them back with a converter;
// ReadJSONL does it for Go). Each line goes to the operating system in one
// write as soon as it is logged, so a crashed trainer loses no finished step.
// The file is opened for appending, so a resumed run continues it; a reader
// takes the last record of a repeated step.
type JSONL struct {
	path string
	f    *os.File
	buf  []byte
}

// CreateJSONL opens path for appending, creating it and its folder if needed.
func CreateJSONL(path string) (*JSONL, error) {
	if dir := parentDir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("metrics: jsonl sink %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: jsonl sink %s: %w", path, err)
	}
	return &JSONL{path: path, f: f}, nil
}

// Name reports "jsonl <path>".
func (j *JSONL) Name() string { return "jsonl " + j.path }

// Path is the file the sink appends to.
func (j *JSONL) Path() string { return j.path }

// Log appends the step's line.
func (j *JSONL) Log(step int, values map[string]float64) error {
	if j.f == nil {
		return fmt.Errorf("metrics: jsonl sink %s: step %d: closed", j.path, step)
	}
	j.buf = AppendJSONLine(j.buf[:0], step, values)
	if _, err := j.f.Write(j.buf); err != nil {
		return fmt.Errorf("metrics: jsonl sink %s: step %d: %w", j.path, step, err)
	}
	return nil
}

// Close syncs the file to disk and closes it.
func (j *JSONL) Close() error {
	if j.f == nil {
		return nil
	}
	f := j.f
	j.f = nil
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("metrics: jsonl sink %s: close: %w", j.path, err)
	}
	return nil
}

// AppendJSONLine appends one step's JSONL record, newline included, to b.
func AppendJSONLine(b []byte, step int, values map[string]float64) []byte {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, `,"data":{`...)
	for i, k := range sortedKeys(values) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch v := values[k]; {
		case math.IsNaN(v):
			b = append(b, `"NaN"`...)
		case math.IsInf(v, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(v, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = AppendNumber(b, v)
		}
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD as
// encoding/json does, everything else as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// Record is one line of a JSONL metrics file.
type Record struct {
	Step int
	Data map[string]float64
}

// ReadJSONL reads a metrics file written by the JSONL sink. Blank lines are
// skipped and fields other than step and data are ignored. On a malformed
// line it returns the records before it and an error naming the file and
// line, so the intact part of a crashed run's file is still usable.
func ReadJSONL(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	return readJSONL(f, path)
}

func readJSONL(r io.Reader, name string) ([]Record, error) {
	br := bufio.NewReader(r)
	var recs []Record
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			rec, perr := parseJSONLine(text)
			if perr != nil {
				return recs, fmt.Errorf("metrics: %s:%d: %w", name, line, perr)
			}
			recs = append(recs, rec)
		}
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("metrics: %s:%d: %w", name, line, err)
		}
	}
}

func parseJSONLine(text []byte) (Record, error) {
	var raw struct {
		Step *json.Number               `json:"step"`
		Data map[string]json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Record{}, err
	}
	if dec.More() {
		return Record{}, errors.New("text after the JSON object")
	}
	if raw.Step == nil {
		return Record{}, errors.New(`no "step" field`)
	}
	step, err := strconv.Atoi(raw.Step.String())
	if err != nil || step < 0 {
		return Record{}, fmt.Errorf("step %s is not a non-negative integer", raw.Step)
	}
	if raw.Data == nil {
		return Record{}, errors.New(`no "data" object`)
	}
	rec := Record{Step: step, Data: make(map[string]float64, len(raw.Data))}
	for k, v := range raw.Data {
		x, err := parseJSONValue(v)
		if err != nil {
			return Record{}, fmt.Errorf("data field %q: %w", k, err)
		}
		rec.Data[k] = x
	}
	return rec, nil
}

func parseJSONValue(v json.RawMessage) (float64, error) {
	if len(v) > 0 && v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, err
		}
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("string %q is not a number (want a number, \"NaN\", \"Infinity\" or \"-Infinity\")", s)
	}
	x, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number", v)
	}
	return x, nil
}

// parentDir is filepath.Dir without the "." for a bare file name.
func parentDir(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			if i == 0 {
				return path[:1]
			}
			return path[:i]
		}
	}
	return ""
}
