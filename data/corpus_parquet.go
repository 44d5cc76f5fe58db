package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// parquetCorpus reads passages from a parquet corpus: one passage per row,
// with an id column, a title column (optional when contents is given),
// and contents ("Title\ntext", as wiki-18 and corag/kilt-corpus) or text
// (the body alone, as DPR's psgs_w100 and FlashRAG's converted corpora);
// wikipedia_id is kept when present. Rows are read a batch at a time.
type parquetCorpus struct {
	reader *parquet.GenericReader[any]
	buf    []any
	n, at  int
	done   bool
	has    map[string]bool
}

func openParquetCorpus(f *os.File, path string, opts CorpusOptions) (*CorpusReader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: corpus %s: %w", path, err)
	}
	return newParquetCorpus(f, st.Size(), f, path, opts)
}

// newParquetCorpus reads a parquet corpus from r; closer, if not nil, is
// closed with the reader.
func newParquetCorpus(f io.ReaderAt, size int64, closer io.Closer, path string, opts CorpusOptions) (cr *CorpusReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("data: corpus %s: corrupt parquet file: %v", path, p)
		}
	}()
	if err := checkParquet(f, size); err != nil {
		return nil, fmt.Errorf("data: corpus %s: not a readable parquet file: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("data: corpus %s: not a readable parquet file: %w", path, err)
	}
	has := map[string]bool{}
	for _, fl := range pf.Schema().Fields() {
		has[fl.Name()] = true
	}
	if !has["id"] {
		return nil, fmt.Errorf("data: corpus %s: parquet corpus has no id column", path)
	}
	if !has["contents"] && !has["text"] {
		return nil, fmt.Errorf("data: corpus %s: parquet corpus has neither a contents nor a text column", path)
	}
	if !has["contents"] && !has["title"] {
		return nil, fmt.Errorf("data: corpus %s: parquet corpus has a text column but no title column", path)
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 20
	}
	if opts.Layout == "" || opts.Layout == LayoutAuto {
		opts.Layout = LayoutKILT
		if !has["title"] {
			opts.Layout = LayoutWiki18
		}
	}
	pc := &parquetCorpus{reader: parquet.NewGenericReader[any](pf), buf: make([]any, parquetBatch), has: has}
	cl := multiCloser{pc}
	if closer != nil {
		cl = append(cl, closer)
	}
	return &CorpusReader{name: path, opts: opts, rows: pc, closer: cl}, nil
}

func (pc *parquetCorpus) Close() error { return pc.reader.Close() }

// next returns the next passage; a bad row is a *CorpusError (skippable),
// a failed read another error.
func (pc *parquetCorpus) next(c *CorpusReader) (p Passage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("data: corpus %s: corrupt parquet file near row %d: %v", c.name, c.line+1, r)
		}
	}()
	if pc.at == pc.n {
		if pc.done {
			return Passage{}, io.EOF
		}
		clear(pc.buf[:pc.n])
		n, rerr := pc.reader.Read(pc.buf)
		pc.n, pc.at = n, 0
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return Passage{}, fmt.Errorf("data: corpus %s after row %d: %w", c.name, c.line, rerr)
		}
		if rerr != nil || n == 0 {
			pc.done = true
		}
		if n == 0 {
			return Passage{}, io.EOF
		}
	}
	row, _ := pc.buf[pc.at].(map[string]any)
	pc.at++
	c.line++
	return pc.passage(c, row)
}

func (pc *parquetCorpus) passage(c *CorpusReader, row map[string]any) (Passage, error) {
	fail := func(field, format string, args ...any) error {
		return &CorpusError{File: c.name, Line: c.line, Row: true, Field: field, Err: fmt.Errorf(format, args...)}
	}
	str := func(col string) (string, bool, error) {
		switch v := row[col].(type) {
		case nil:
			return "", false, nil
		case string:
			return v, true, nil
		case []byte:
			return string(v), true, nil
		case int32, int64:
			if col == "id" || col == "wikipedia_id" {
				return fmt.Sprint(v), true, nil
			}
		}
		return "", false, fail(col, "want a string, found %T", row[col])
	}
	id, ok, err := str("id")
	if err != nil {
		return Passage{}, err
	}
	if !ok || id == "" {
		return Passage{}, fail("id", "missing")
	}
	title, hasTitle, err := str("title")
	if err != nil {
		return Passage{}, err
	}
	contents, hasContents, err := str("contents")
	if err != nil {
		return Passage{}, err
	}
	p := Passage{ID: id, Title: title, Contents: contents}
	if !hasContents {
		text, hasText, err := str("text")
		if err != nil {
			return Passage{}, err
		}
		if !hasText {
			return Passage{}, fail("contents", "missing (and no text)")
		}
		if !hasTitle {
			return Passage{}, fail("title", "missing")
		}
		p.Contents = title + "\n" + text
	}
	if !hasTitle {
		first, _, _ := strings.Cut(p.Contents, "\n")
		p.Title = strings.TrimSpace(first)
		if len(p.Title) >= 2 && p.Title[0] == '"' && p.Title[len(p.Title)-1] == '"' {
			p.Title = p.Title[1 : len(p.Title)-1]
		}
	}
	if len(p.Contents) > c.opts.MaxLineBytes {
		return Passage{}, fail("contents", "%v", ErrLineTooLong)
	}
	if p.WikipediaID, _, err = str("wikipedia_id"); err != nil {
		return Passage{}, err
	}
	return p, nil
}
