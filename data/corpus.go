package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Passage is one retrievable unit of a corpus.
//
// Contents is kept exactly as the file holds it, because the retrieval tools
// of Search-R1 and Agent-R1 format hits from the raw string (Search-R1 shows
// the first line of contents, quotes and all, as the title).
type Passage struct {
	ID       string // the corpus id; wiki-18 uses the 0-based row number as a string
	Title    string // the article title without the quotes wiki-18 puts around it
	Contents string // the raw contents field: "\"Title\"\ntext" (wiki-18) or "Title\ntext" (KILT)
	// WikipediaID is KILT's article id (corag/kilt-corpus rows and the
	// knowledge source carry it); "" for corpora without one. Agent-R1's
	// evaluation maps hits back to articles by it.
	WikipediaID string
}

// Text is the passage body: Contents without its first line when that line
// is the title (quoted or not), else the whole of Contents.
func (p Passage) Text() string {
	first, rest, ok := strings.Cut(p.Contents, "\n")
	if ok && (first == p.Title || first == `"`+p.Title+`"`) {
		return rest
	}
	return p.Contents
}

// CorpusLayout names a JSONL corpus layout.
type CorpusLayout string

const (
	// LayoutAuto picks the layout from the first record's fields.
	LayoutAuto CorpusLayout = "auto"
	// LayoutWiki18 is Search-R1's and FlashRAG's wiki-18 JSONL:
	// {"id": "0", "contents": "\"Title\"\ntext"}.
	LayoutWiki18 CorpusLayout = "wiki18"
	// LayoutKILT is the KILT passage corpus as Agent-R1 uses it
	// (Hugging Face corag/kilt-corpus): {"id", "title", "contents"}.
	LayoutKILT CorpusLayout = "kilt"
	// LayoutKILTSource is KILT's original knowledge source, one article per
	// line: {"wikipedia_id", "wikipedia_title", "text": [paragraph, ...]}.
	// Each non-empty paragraph after the title becomes one passage with the
	// id "wikipedia_id-paragraph_index".
	LayoutKILTSource CorpusLayout = "kilt-source"
)

// ParseCorpusLayout accepts a layout name as written on a command line.
func ParseCorpusLayout(s string) (CorpusLayout, error) {
	switch l := CorpusLayout(strings.ToLower(strings.TrimSpace(s))); l {
	case LayoutAuto, LayoutWiki18, LayoutKILT, LayoutKILTSource:
		return l, nil
	case "", "wiki-18":
		if s == "" {
			return LayoutAuto, nil
		}
		return LayoutWiki18, nil
	}
	return "", fmt.Errorf("data: unknown corpus layout %q (want auto, wiki18, kilt or kilt-source)", s)
}

// CorpusOptions controls a CorpusReader.
type CorpusOptions struct {
	Layout CorpusLayout // LayoutAuto when empty
	// SkipMalformed skips a malformed line and records it in Skipped instead
	// of stopping with the error.
	SkipMalformed bool
	// MaxLineBytes bounds one line; a longer line is malformed. 0 means 64 MiB.
	MaxLineBytes int
}

// CorpusError says which file, line and field of a corpus was wrong.
type CorpusError struct {
	File  string
	Line  int    // 1-based line (JSONL) or row (parquet)
	Field string // empty when the line as a whole is wrong
	Err   error
	Row   bool // Line counts parquet rows
}

func (e *CorpusError) Error() string {
	unit := "line"
	if e.Row {
		unit = "row"
	}
	if e.Field != "" {
		return fmt.Sprintf("data: corpus %s %s %d: field %q: %v", e.File, unit, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("data: corpus %s %s %d: %v", e.File, unit, e.Line, e.Err)
}

func (e *CorpusError) Unwrap() error { return e.Err }

// ErrLineTooLong marks a line longer than CorpusOptions.MaxLineBytes.
var ErrLineTooLong = errors.New("line longer than the limit")

// CorpusReader streams passages from a JSONL corpus, one line at a time, so
// a 14 GB wiki-18 file never sits in memory.
type CorpusReader struct {
	name    string
	opts    CorpusOptions
	r       *bufio.Reader
	line    int
	pending []Passage // passages of a kilt-source article not yet returned
	skipped []*CorpusError
	nSkip   int
	err     error // sticky
	closer  io.Closer
	rows    *parquetCorpus // set for a parquet corpus; r is nil then
}

// maxKeptSkips bounds how many skip reports a reader keeps; the count is exact.
const maxKeptSkips = 100

// NewCorpusReader reads a JSONL corpus from r; name is used in errors.
func NewCorpusReader(r io.Reader, name string, opts CorpusOptions) *CorpusReader {
	if opts.Layout == "" {
		opts.Layout = LayoutAuto
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 20
	}
	return &CorpusReader{name: name, opts: opts, r: bufio.NewReaderSize(r, 1<<20)}
}

// OpenCorpus opens a corpus file. The format is told by content: a file
// starting with PAR1 is a parquet corpus (columns id, title and contents
// or text, wikipedia_id), one starting with the gzip magic is
// decompressed on the fly (wiki-18 is distributed as wiki-18.jsonl.gz),
// anything else is JSONL. Close the reader.
func OpenCorpus(path string, opts CorpusOptions) (*CorpusReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: open corpus: %w", err)
	}
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	if n == 4 && string(magic[:]) == "PAR1" {
		cr, err := openParquetCorpus(f, path, opts)
		if err != nil {
			f.Close()
			return nil, err
		}
		return cr, nil
	}
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		f.Close()
		return nil, fmt.Errorf("data: corpus %s: not a parquet file (it starts with %q, not the PAR1 magic)", path, magic[:n])
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("data: corpus %s: %w", path, err)
	}
	var src io.Reader = f
	closer := io.Closer(f)
	if n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("data: corpus %s: %w", path, err)
		}
		src = gz
		closer = multiCloser{gz, f}
	}
	cr := NewCorpusReader(src, path, opts)
	cr.closer = closer
	return cr, nil
}

// Name is the file name the reader reports in errors.
func (c *CorpusReader) Name() string { return c.name }

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close closes the file OpenCorpus opened; it is a no-op otherwise.
func (c *CorpusReader) Close() error {
	if c.closer == nil {
		return nil
	}
	err := c.closer.Close()
	c.closer = nil
	return err
}

// Layout is the layout in use; after the first Next it is never LayoutAuto.
func (c *CorpusReader) Layout() CorpusLayout { return c.opts.Layout }

// Line is the number of the last line read (1-based).
func (c *CorpusReader) Line() int { return c.line }

// Skipped returns how many lines were skipped and the first reports.
func (c *CorpusReader) Skipped() (int, []*CorpusError) { return c.nSkip, c.skipped }

// Next returns the next passage, or io.EOF after the last one. With
// SkipMalformed unset the first malformed line ends the stream with a
// *CorpusError; a read error always does.
func (c *CorpusReader) Next() (Passage, error) {
	for {
		if len(c.pending) > 0 {
			p := c.pending[0]
			c.pending = c.pending[1:]
			return p, nil
		}
		if c.err != nil {
			return Passage{}, c.err
		}
		if c.rows != nil {
			p, err := c.rows.next(c)
			if cerr, ok := err.(*CorpusError); ok && c.opts.SkipMalformed {
				c.skip(cerr)
				continue
			}
			if err != nil {
				c.err = err
				return Passage{}, err
			}
			return p, nil
		}
		line, err := c.readLine()
		if err != nil {
			c.err = err
			if cerr, ok := err.(*CorpusError); ok && c.opts.SkipMalformed && errors.Is(cerr, ErrLineTooLong) {
				c.err = nil
				c.skip(cerr)
			}
			continue
		}
		line = bytes.TrimSpace(line)
		if c.line == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			continue
		}
		ps, perr := c.parse(line)
		if perr != nil {
			if c.opts.SkipMalformed {
				c.skip(perr)
				continue
			}
			c.err = perr
			return Passage{}, perr
		}
		c.pending = ps
	}
}

func (c *CorpusReader) skip(e *CorpusError) {
	c.nSkip++
	if len(c.skipped) < maxKeptSkips {
		c.skipped = append(c.skipped, e)
	}
}

// readLine returns the next line without its newline; a line over the limit
// is consumed whole and reported as ErrLineTooLong.
func (c *CorpusReader) readLine() ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := c.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > c.opts.MaxLineBytes+1 {
				tooLong, buf = true, nil
			} else if buf == nil && err == nil {
				c.line++
				return chunk, nil // the common case: no copy
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			c.line++
			if tooLong {
				return nil, &CorpusError{File: c.name, Line: c.line, Err: ErrLineTooLong}
			}
			return buf, nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if tooLong {
				c.line++
				return nil, &CorpusError{File: c.name, Line: c.line, Err: ErrLineTooLong}
			}
			if len(buf) == 0 {
				return nil, io.EOF
			}
			c.line++
			return buf, nil
		default:
			return nil, fmt.Errorf("data: corpus %s after line %d: %w", c.name, c.line, err)
		}
	}
}

// corpusRecord holds every field of every layout; RawMessage keeps ids that
// are numbers in some dumps and strings in others.
type corpusRecord struct {
	ID             json.RawMessage `json:"id"`
	UnderscoreID   json.RawMessage `json:"_id"`
	Contents       *string         `json:"contents"`
	Title          *string         `json:"title"`
	WikipediaID    json.RawMessage `json:"wikipedia_id"`
	WikipediaTitle *string         `json:"wikipedia_title"`
	Text           json.RawMessage `json:"text"`
}

func (c *CorpusReader) fail(field string, format string, args ...any) *CorpusError {
	return &CorpusError{File: c.name, Line: c.line, Field: field, Err: fmt.Errorf(format, args...)}
}

func (c *CorpusReader) parse(line []byte) ([]Passage, *CorpusError) {
	if line[0] != '{' {
		return nil, c.fail("", "not a JSON object")
	}
	var rec corpusRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, c.fail(te.Field, "has JSON type %s, want %s", te.Value, te.Type)
		}
		return nil, c.fail("", "invalid JSON: %v", err)
	}
	if c.opts.Layout == LayoutAuto {
		// The knowledge source is told by its article shape (a title field
		// of its own, text as a list of paragraphs); a passage row that
		// merely carries wikipedia_id ({id, title, contents,
		// wikipedia_id}, corag/kilt-corpus) is KILT.
		switch {
		case rec.WikipediaTitle != nil || bytes.HasPrefix(bytes.TrimSpace(rec.Text), []byte("[")):
			c.opts.Layout = LayoutKILTSource
		case rec.Title != nil || rec.WikipediaID != nil:
			c.opts.Layout = LayoutKILT
		default:
			c.opts.Layout = LayoutWiki18
		}
	}
	switch c.opts.Layout {
	case LayoutWiki18:
		id, err := c.idField("id", rec.ID)
		if err != nil {
			return nil, err
		}
		if rec.Contents == nil {
			return nil, c.fail("contents", "missing")
		}
		title, _, _ := strings.Cut(*rec.Contents, "\n")
		title = strings.TrimSpace(title)
		if len(title) >= 2 && title[0] == '"' && title[len(title)-1] == '"' {
			title = title[1 : len(title)-1]
		}
		return []Passage{{ID: id, Title: title, Contents: *rec.Contents}}, nil
	case LayoutKILT:
		id, err := c.idField("id", rec.ID)
		if err != nil {
			return nil, err
		}
		if rec.Title == nil {
			return nil, c.fail("title", "missing")
		}
		p := Passage{ID: id, Title: *rec.Title}
		switch {
		case rec.Contents != nil:
			p.Contents = *rec.Contents
		case len(rec.Text) > 0 && rec.Text[0] == '"':
			// {id, title, text}: DPR's and FlashRAG's passage rows.
			var text string
			if jerr := json.Unmarshal(rec.Text, &text); jerr != nil {
				return nil, c.fail("text", "%v", jerr)
			}
			p.Contents = p.Title + "\n" + text
		default:
			return nil, c.fail("contents", "missing (and no text)")
		}
		if len(rec.WikipediaID) > 0 && string(rec.WikipediaID) != "null" {
			if p.WikipediaID, err = c.idField("wikipedia_id", rec.WikipediaID); err != nil {
				return nil, err
			}
		}
		return []Passage{p}, nil
	case LayoutKILTSource:
		return c.parseKILTSource(&rec)
	}
	return nil, c.fail("", "unknown layout %q", c.opts.Layout)
}

func (c *CorpusReader) idField(field string, raw json.RawMessage) (string, *CorpusError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", c.fail(field, "missing")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", c.fail(field, "%v", err)
		}
		if s == "" {
			return "", c.fail(field, "empty")
		}
		return s, nil
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
		return "", c.fail(field, "want a string or an integer, got %.40s", raw)
	}
	return string(raw), nil
}

func (c *CorpusReader) parseKILTSource(rec *corpusRecord) ([]Passage, *CorpusError) {
	idRaw, field := rec.WikipediaID, "wikipedia_id"
	if len(idRaw) == 0 {
		idRaw, field = rec.UnderscoreID, "_id"
	}
	id, err := c.idField(field, idRaw)
	if err != nil {
		return nil, err
	}
	if rec.WikipediaTitle == nil {
		return nil, c.fail("wikipedia_title", "missing")
	}
	if len(rec.Text) == 0 {
		return nil, c.fail("text", "missing")
	}
	var paras []string
	if jerr := json.Unmarshal(rec.Text, &paras); jerr != nil {
		return nil, c.fail("text", "want a list of strings: %v", jerr)
	}
	title := *rec.WikipediaTitle
	var out []Passage
	for i, p := range paras {
		p = strings.TrimSpace(p)
		// KILT's first paragraph repeats the title; section headings are
		// markers, not content.
		if p == "" || (i == 0 && p == strings.TrimSpace(title)) || strings.HasPrefix(p, "Section::::") {
			continue
		}
		out = append(out, Passage{ID: id + "-" + strconv.Itoa(i), Title: title, Contents: title + "\n" + p, WikipediaID: id})
	}
	return out, nil
}

// ReadCorpus reads a whole corpus file into memory; for small corpora and
// tests. It returns the passages and the number of skipped lines.
func ReadCorpus(path string, opts CorpusOptions) ([]Passage, int, error) {
	cr, err := OpenCorpus(path, opts)
	if err != nil {
		return nil, 0, err
	}
	defer cr.Close()
	var out []Passage
	for {
		p, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, 0, err
		}
		out = append(out, p)
	}
	n, _ := cr.Skipped()
	return out, n, nil
}
