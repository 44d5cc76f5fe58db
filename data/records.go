package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// readLines reads JSONL: one record per line, blank lines ignored.
func (l *loader) readLines(br *bufio.Reader) error {
	limit := l.opt.maxRecord()
	var line []byte
	for lineNo := 1; ; lineNo++ {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(chunk) > limit+2 { // +2: the "\r\n" is no part of the record
					tooLong = true
				} else {
					line = append(line, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return &LoadError{File: l.name, Line: lineNo, Err: err}
		}
		atEOF := err == io.EOF
		if tooLong {
			l.rep.Records++
			if e := l.bad(&LoadError{File: l.name, Line: lineNo, Err: ErrRecordTooLarge}); e != nil {
				return e
			}
		} else if len(bytes.TrimSpace(line)) > 0 {
			if e := l.record(line, &LoadError{File: l.name, Line: lineNo}); e != nil {
				return e
			}
		}
		if atEOF {
			return nil
		}
	}
}

// readArray reads one JSON array element by element.
func (l *loader) readArray(br *bufio.Reader) error {
	sc := arrayScanner{r: br, line: 1, max: l.opt.maxRecord()}
	for {
		elem, line, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var le *LoadError
			if errors.As(err, &le) {
				le.File = l.name
			}
			if !errors.Is(err, ErrRecordTooLarge) {
				return err // the array's structure is broken: no way to go on
			}
			l.rep.Records++
			if e := l.bad(le); e != nil {
				return e
			}
			continue
		}
		if e := l.record(elem, &LoadError{File: l.name, Line: line, Record: sc.count}); e != nil {
			return e
		}
	}
}

// record decodes one JSON record and delivers its sample; where holds the
// file and line. It returns an error only when the stream must stop.
func (l *loader) record(raw []byte, where *LoadError) error {
	l.rep.Records++
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		where.Err = fmt.Errorf("not a JSON object: %w", err)
		return l.bad(where)
	}
	if rec == nil {
		where.Err = errors.New("not a JSON object: null")
		return l.bad(where)
	}
	if l.decode == nil {
		if err := l.chooseDecoder(rec); err != nil {
			if errors.Is(err, errNeedSource) {
				// The record's own fault comes first: a config hint must
				// never hide a broken line.
				if _, ferr := decodeFlashRAG(rec, "", l.opt.AllowUnanswered); ferr != nil {
					where.Field, where.Err = ferr.field, ferr.err
					return l.bad(where)
				}
			}
			where.Err = err
			return where // the format is wrong for the whole file
		}
	}
	s, ferr := l.decode(rec)
	if ferr != nil {
		where.Field, where.Err = ferr.field, ferr.err
		return l.bad(where)
	}
	return l.deliver(s, where)
}

// arrayScanner splits a JSON array into the raw bytes of its elements
// without decoding them, counting lines as it goes, so a huge array
// streams in constant memory and a bad element is reported by the line it
// starts on. It tracks only strings and bracket depth; the elements
// themselves are checked by json.Unmarshal, so a malformed element whose
// brackets balance is skipped alone.
type arrayScanner struct {
	r     *bufio.Reader
	line  int // line of the next byte, 1-based
	max   int
	state int // 0 before '[', 1 expecting an element or ']', 2 expecting ',' or ']', 3 done
	count int // elements begun so far; the 1-based index of the current one
	buf   []byte
}

func (s *arrayScanner) fail(line int, format string, args ...any) error {
	return &LoadError{Line: line, Err: fmt.Errorf(format, args...)}
}

// failElement reports a problem of the current element, by its start line
// and its index.
func (s *arrayScanner) failElement(line int, err error) error {
	return &LoadError{Line: line, Record: s.count, Err: err}
}

func (s *arrayScanner) readByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err == nil && c == '\n' {
		s.line++
	}
	return c, err
}

// nextNonSpace returns the next byte that is not white space.
func (s *arrayScanner) nextNonSpace() (byte, error) {
	for {
		c, err := s.readByte()
		if err != nil || !isSpace(c) {
			return c, err
		}
	}
}

// next returns the next element and the line it starts on, io.EOF after
// the closing bracket, an error wrapping ErrRecordTooLarge for an element
// over the limit (skipped; the scan can go on), or another *LoadError when
// the structure is broken.
func (s *arrayScanner) next() ([]byte, int, error) {
	for {
		if s.state == 3 {
			return nil, 0, io.EOF
		}
		c, err := s.nextNonSpace()
		if err == io.EOF {
			return nil, 0, s.fail(s.line, "the JSON array ends without its closing ']'")
		}
		if err != nil {
			return nil, 0, s.fail(s.line, "%v", err)
		}
		switch {
		case s.state == 0:
			if c != '[' {
				return nil, 0, s.fail(s.line, "want a JSON array, found %q", c)
			}
			s.state = 1
		case c == ']':
			s.state = 3
			if c, err := s.nextNonSpace(); err != io.EOF {
				if err != nil {
					return nil, 0, s.fail(s.line, "%v", err)
				}
				return nil, 0, s.fail(s.line, "%q after the closing ']'", c)
			}
			return nil, 0, io.EOF
		case s.state == 2:
			if c != ',' {
				return nil, 0, s.fail(s.line, "want ',' or ']' between array elements, found %q", c)
			}
			s.state = 1
		default:
			s.state = 2
			s.count++
			return s.element(c)
		}
	}
}

// element reads the element that starts with c. It scans the reader's
// buffer a chunk at a time (strings with IndexAny), not byte by byte: the
// bulk of a HotpotQA element is context text inside strings.
func (s *arrayScanner) element(c byte) ([]byte, int, error) {
	start := s.line
	s.buf = append(s.buf[:0], c)
	tooLarge := false
	keep := func(chunk []byte) {
		s.line += bytes.Count(chunk, []byte{'\n'})
		if tooLarge {
			return
		}
		if len(s.buf)+len(chunk) > s.max {
			tooLarge = true
			s.buf = s.buf[:0]
			return
		}
		s.buf = append(s.buf, chunk...)
	}
	depth, inString, escaped := 0, false, false
	switch c {
	case '{', '[':
		depth = 1
	case '"':
		inString = true
	case ',', ']', '}', ':':
		return nil, 0, s.failElement(start, fmt.Errorf("want an array element, found %q", c))
	default:
		// A bare scalar (number, true, null, ...): read to its end.
		for {
			b, err := s.r.Peek(1)
			if err != nil || isSpace(b[0]) || b[0] == ',' || b[0] == ']' {
				break
			}
			keep(b[:1])
			s.r.Discard(1)
		}
		if tooLarge {
			return nil, 0, s.failElement(start, ErrRecordTooLarge)
		}
		return s.buf, start, nil
	}
	for depth > 0 || inString {
		if _, err := s.r.Peek(1); err != nil {
			if err == io.EOF {
				return nil, 0, s.failElement(start, errors.New("the array element that starts here is cut off by the end of the file"))
			}
			return nil, 0, s.fail(s.line, "%v", err)
		}
		chunk, _ := s.r.Peek(s.r.Buffered())
		i := 0
		for i < len(chunk) && (depth > 0 || inString) {
			switch {
			case escaped:
				escaped = false
				i++
			case inString:
				j := bytes.IndexAny(chunk[i:], "\"\\")
				if j < 0 {
					i = len(chunk)
					continue
				}
				i += j
				if chunk[i] == '\\' {
					escaped = true
				} else {
					inString = false
				}
				i++
			default:
				switch chunk[i] {
				case '"':
					inString = true
				case '{', '[':
					depth++
				case '}', ']':
					depth--
				}
				i++
			}
		}
		keep(chunk[:i])
		s.r.Discard(i)
	}
	if tooLarge {
		return nil, 0, s.failElement(start, ErrRecordTooLarge)
	}
	return s.buf, start, nil
}

// record is one JSON object with its fields still raw.
type record map[string]json.RawMessage

// has reports whether the record holds field, with a non-null value.
func (r record) has(field string) bool {
	v, ok := r[field]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// str returns a string field; a missing or null field gives "" and no
// error, a non-string gives an error.
func (r record) str(field string) (string, *fieldError) {
	if !r.has(field) {
		return "", nil
	}
	if s, ok := plainString(r[field]); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(r[field], &s); err != nil {
		return "", fieldErr(field, "want a string, found %s", kindOf(r[field]))
	}
	return s, nil
}

// plainString is the fast path of decoding a JSON string that has no
// escapes: the record it came from was validated as a whole when it was
// split into fields, so the bytes between the quotes are the string, if
// they are valid UTF-8 (encoding/json would replace bad bytes with U+FFFD).
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// required returns a string field that must be present and not blank.
func (r record) required(field string) (string, *fieldError) {
	s, err := r.str(field)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		if r.has(field) {
			return "", fieldErr(field, "empty")
		}
		return "", missing(field)
	}
	return s, nil
}

// id returns an id field: a string, or a number as written.
func (r record) id(field string) (string, *fieldError) {
	if !r.has(field) {
		return "", missing(field)
	}
	raw := bytes.TrimSpace(r[field])
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String(), nil
		}
	}
	s, err := r.required(field)
	if err != nil {
		return "", fieldErr(field, "want a string or a number, found %s", kindOf(r[field]))
	}
	return s, nil
}

// strs returns a list-of-strings field; numbers in it are kept as written
// (some FlashRAG answer lists hold numbers).
func (r record) strs(field string) ([]string, *fieldError) {
	if !r.has(field) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(r[field], &items); err != nil {
		return nil, fieldErr(field, "want a list of strings, found %s", kindOf(r[field]))
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if s, ok := plainString(it); ok {
			out = append(out, s)
			continue
		}
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, s)
			continue
		}
		var n json.Number
		if json.Unmarshal(it, &n) == nil {
			out = append(out, n.String())
			continue
		}
		return nil, fieldErr(field+"["+strconv.Itoa(i)+"]", "want a string, found %s", kindOf(it))
	}
	return out, nil
}

// compact returns a field's value as compact JSON for Extra: keys sorted,
// strings as UTF-8 (no \u escapes), numbers as written; "" when absent or
// null.
func (r record) compact(field string) string {
	if !r.has(field) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(r[field]))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	return compactJSON(v)
}

// compactJSON encodes a decoded value as compact UTF-8 JSON, keys sorted.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// kindOf names the JSON type of a raw value for error messages.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
