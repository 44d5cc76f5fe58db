package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Format names a dataset file format.
type Format string

const (
	// FormatAuto tells the format from the file: parquet by its magic
	// bytes, a JSON array or JSONL by its first byte, and then the dataset
	// by the fields of the first record.
	FormatAuto     Format = ""
	FormatHotpotQA Format = "hotpotqa"        // one JSON array
	Format2Wiki    Format = "2wikimultihopqa" // one JSON array
	FormatMuSiQue  Format = "musique"         // JSONL
	FormatFlashRAG Format = "flashrag"        // JSONL
	FormatParquet  Format = "parquet"         // verl / Search-R1 / Agent-R1
)

// ParseFormat accepts a format name as written on a command line.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatAuto, FormatHotpotQA, Format2Wiki, FormatMuSiQue, FormatFlashRAG, FormatParquet:
		return f, nil
	case "auto":
		return FormatAuto, nil
	case "2wiki":
		return Format2Wiki, nil
	}
	return "", fmt.Errorf("data: unknown dataset format %q (want auto, hotpotqa, 2wikimultihopqa, musique, flashrag or parquet)", s)
}

// The data_source names r1go knows: FlashRAG's dataset names as Search-R1
// uses them, Agent-R1's Hugging Face repository names, and the synthetic
// world's.
var knownSources = map[string]string{
	"nq": "nq", "triviaqa": "triviaqa", "popqa": "popqa", "hotpotqa": "hotpotqa",
	"2wikimultihopqa": "2wikimultihopqa", "musique": "musique", "bamboogle": "bamboogle",
	"hotpotqa/hotpot_qa": "hotpotqa", "xanhho/2WikiMultihopQA": "2wikimultihopqa", "bdsaglam/musique": "musique",
	"synthetic": "synthetic",
}

// RegisterSource adds a data_source name, with the canonical name its
// samples are scored as, to the names loaders accept. Call it from init;
// it panics on a name registered twice.
func RegisterSource(name, canonical string) {
	if _, dup := knownSources[name]; dup {
		panic("data: RegisterSource: duplicate data_source " + strconv.Quote(name))
	}
	knownSources[name] = canonical
}

// CanonicalSource maps a data_source to the dataset it names
// ("hotpotqa/hotpot_qa" -> "hotpotqa"); ok is false for an unknown name.
func CanonicalSource(name string) (canonical string, ok bool) {
	c, ok := knownSources[name]
	return c, ok
}

// LoadOptions controls Load and Stream. The zero value detects the format
// and fails on the first bad record.
type LoadOptions struct {
	Format Format
	// SkipMalformed skips a bad record and lists it in Report.Skipped
	// instead of stopping with its error.
	SkipMalformed bool
	// DataSource (data.data_source) names the source of files that carry
	// none (HotpotQA, 2Wiki, MuSiQue, FlashRAG; parquet without a
	// data_source column). Empty means the format's own name; for
	// FlashRAG, the name inferred from the file's path (see SourceFromPath).
	DataSource string
	// DataSources sets the source per file, by the path as given or its
	// base name; it wins over DataSource for the files it names.
	DataSources map[string]string
	// PromptJSON (data.prompt_json) accepts a parquet prompt stored as a
	// string holding a JSON list of {role, content} messages; without it
	// a string prompt is an error.
	PromptJSON bool
	// AnswerColumn (data.answer_column) names the parquet column gold
	// answers are read from when a row has no reward_model.ground_truth:
	// golden_answers, answers, or answer (with answer_aliases). Empty: such
	// a row is bad.
	AnswerColumn string
	// ExtraSources are data_source names accepted besides the known ones.
	ExtraSources []string
	// AllowUnanswered keeps records without a gold answer (test splits)
	// as samples with no Answers instead of treating them as bad.
	AllowUnanswered bool
	// MaxSkipFraction (data.max_skip_fraction) bounds skip mode: Load and
	// LoadFiles fail when more than this share of a file's records is bad,
	// and when a file has records but none of them is good, whatever the
	// share. 0 means DefaultMaxSkipFraction; 1 allows any share.
	MaxSkipFraction float64
	// MaxRecordBytes bounds one record (a line, an array element); a
	// longer one is bad. 0 means 64 MiB.
	MaxRecordBytes int
}

func (o *LoadOptions) maxRecord() int {
	if o.MaxRecordBytes <= 0 {
		return 64 << 20
	}
	return o.MaxRecordBytes
}

func (o *LoadOptions) knownSource(name string) bool {
	_, ok := knownSources[name]
	return ok || slices.Contains(o.ExtraSources, name)
}

// LoadError says which file, record and field of a dataset was wrong.
type LoadError struct {
	File   string
	Line   int    // 1-based line the record starts on (JSON, JSONL); 0 for parquet
	Record int    // 1-based element of a JSON array (HotpotQA's files are one line); 0 otherwise
	Row    int    // 1-based parquet row; 0 otherwise
	Field  string // empty when the record as a whole is wrong
	Err    error
}

func (e *LoadError) Error() string {
	if r := e.reason(); r != "" {
		return "data: " + e.File + " " + r
	}
	if e.Field != "" {
		return fmt.Sprintf("data: %s: field %q: %v", e.File, e.Field, e.Err)
	}
	return fmt.Sprintf("data: %s: %v", e.File, e.Err)
}

// reason is the error without the file: "row 3: field ...: ..."; "" when
// the error names no record.
func (e *LoadError) reason() string {
	var where string
	switch {
	case e.Line > 0 && e.Record > 0:
		where = "line " + strconv.Itoa(e.Line) + " (record " + strconv.Itoa(e.Record) + ")"
	case e.Line > 0:
		where = "line " + strconv.Itoa(e.Line)
	case e.Row > 0:
		where = "row " + strconv.Itoa(e.Row)
	default:
		return ""
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: field %q: %v", where, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Causes a LoadError wraps, for errors.Is.
var (
	ErrMissingField   = errors.New("missing")
	ErrRecordTooLarge = errors.New("record longer than LoadOptions.MaxRecordBytes")
	ErrUnknownSource  = errors.New("unknown data_source")
	ErrDuplicateID    = errors.New("duplicate id")
)

// DefaultMaxSkipFraction is data.max_skip_fraction's default: skip mode is
// for a few bad records among good ones, not for a file of another shape.
const DefaultMaxSkipFraction = 0.1

// ErrTooManySkipped: skip mode would drop every record of a file, or more
// than LoadOptions.MaxSkipFraction of them.
var ErrTooManySkipped = errors.New("too many bad records for skip mode")

// ErrStop, returned by a Stream callback, ends the stream early without an
// error.
var ErrStop = errors.New("data: stop")

// Report tells what a load read.
type Report struct {
	File    string
	Format  Format // the format read, after detection
	Records int    // records seen, good and bad
	Samples int    // samples delivered
	Skipped []*LoadError
}

// Load reads a whole dataset file into memory. In skip mode it fails with
// ErrTooManySkipped when the file has no good record or more bad ones than
// LoadOptions.MaxSkipFraction allows.
func Load(path string, opt LoadOptions) ([]Sample, Report, error) {
	var out []Sample
	rep, err := Stream(path, opt, func(s Sample) error {
		out = append(out, s)
		return nil
	})
	if err == nil {
		err = checkSkips(rep, opt)
	}
	return out, rep, err
}

// checkSkips holds skip mode to its purpose, a few bad records among good
// ones: a file it leaves without a sample, or thins past
// LoadOptions.MaxSkipFraction, is an error naming the file, the count and
// the first bad record's reason, so a file of another shape never loads
// as empty.
func checkSkips(rep Report, opt LoadOptions) error {
	n := len(rep.Skipped)
	if !opt.SkipMalformed || n == 0 {
		return nil
	}
	limit := opt.MaxSkipFraction
	if limit <= 0 {
		limit = DefaultMaxSkipFraction
	}
	share := float64(n) / float64(max(rep.Records, 1))
	if rep.Samples > 0 && share <= limit {
		return nil
	}
	first := rep.Skipped[0].reason()
	if first == "" {
		first = rep.Skipped[0].Error()
	}
	what := "none is usable"
	if rep.Samples > 0 {
		what = fmt.Sprintf("more than data.max_skip_fraction %g allows", limit)
	}
	return fmt.Errorf("data: %s: %d of %d records are bad, %s: %w (data.on_bad_record=skip); the first: %s",
		rep.File, n, rep.Records, what, ErrTooManySkipped, first)
}

// LoadFiles reads several files into one set, as a trainer's list of
// train files; an id seen in an earlier file is a duplicate (skipped or
// fatal as for any bad record). Skip mode's limits apply to each file as
// in Load.
func LoadFiles(paths []string, opt LoadOptions) ([]Sample, []Report, error) {
	var out []Sample
	var reports []Report
	seen := map[string]string{}
	for _, path := range paths {
		var dupes []*LoadError
		rep, err := Stream(path, opt, func(s Sample) error {
			if prev, dup := seen[s.ID]; dup {
				e := &LoadError{File: path, Field: "id", Err: fmt.Errorf("%w %q, first seen in %s", ErrDuplicateID, s.ID, prev)}
				if !opt.SkipMalformed {
					return e
				}
				dupes = append(dupes, e)
				return nil
			}
			seen[s.ID] = path
			out = append(out, s)
			return nil
		})
		rep.Skipped = append(rep.Skipped, dupes...)
		rep.Samples -= len(dupes)
		reports = append(reports, rep)
		if err == nil {
			err = checkSkips(rep, opt)
		}
		if err != nil {
			return out, reports, err
		}
	}
	if len(out) == 0 && len(paths) > 0 {
		return out, reports, fmt.Errorf("data: %s: %w (%d records read, %d skipped as bad)", strings.Join(paths, ", "), ErrNoSamples, countRecords(reports), SkippedCount(reports))
	}
	return out, reports, nil
}

// ErrNoSamples: the files given hold no usable sample.
var ErrNoSamples = errors.New("no samples loaded")

// ParseOnBadRecord reads data.on_bad_record: "error" (the default: the
// first bad record stops the load) or "skip" (bad records are skipped,
// counted and listed); it returns LoadOptions.SkipMalformed.
func ParseOnBadRecord(s string) (skip bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "error":
		return false, nil
	case "skip":
		return true, nil
	}
	return false, fmt.Errorf("data: data.on_bad_record %q: want error or skip", s)
}

// SkippedCount is how many bad records the loads skipped; trainers log it
// (data/skipped_records) beside printing SkipSummary.
func SkippedCount(reports []Report) int {
	n := 0
	for _, r := range reports {
		n += len(r.Skipped)
	}
	return n
}

func countRecords(reports []Report) int {
	n := 0
	for _, r := range reports {
		n += r.Records
	}
	return n
}

// SkipSummary is the line a command prints after loading: the skipped
// count per file and the first reasons (at most max); "" when nothing was
// skipped.
func SkipSummary(reports []Report, max int) string {
	total := SkippedCount(reports)
	if total == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "data: skipped %d bad record(s) (data.on_bad_record=skip):", total)
	shown := 0
	for _, r := range reports {
		if len(r.Skipped) == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s: %d of %d;", r.File, len(r.Skipped), r.Records)
	}
	for _, r := range reports {
		for _, e := range r.Skipped {
			if shown == max {
				return b.String()
			}
			b.WriteString("\n  " + e.Error())
			shown++
		}
	}
	return b.String()
}

// Stream reads a dataset file and calls fn for every sample in file order.
// It stops at the first error fn returns (ErrStop stops without one).
func Stream(path string, opt LoadOptions, fn func(Sample) error) (Report, error) {
	rep := Report{File: path, Format: opt.Format}
	if _, err := ParseFormat(string(opt.Format)); err != nil {
		return rep, err
	}
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	if src, ok := opt.DataSources[path]; ok {
		opt.DataSource = src
	} else if src, ok := opt.DataSources[filepath.Base(path)]; ok {
		opt.DataSource = src
	}
	// Formats are told by content, never by the file name: a ".parquet"
	// that is JSON, or a ".jsonl" that is gzip, is read for what it is or
	// refused for what it is not.
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	isParquet := n == 4 && string(magic[:]) == "PAR1"
	if opt.Format == FormatParquet || (opt.Format == FormatAuto && isParquet) {
		if !isParquet {
			return rep, &LoadError{File: path, Err: fmt.Errorf("not a parquet file (it starts with %q, not the PAR1 magic)", magic[:n])}
		}
		st, err := f.Stat()
		if err != nil {
			return rep, fmt.Errorf("data: %w", err)
		}
		return streamParquet(f, st.Size(), path, opt, fn)
	}
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		return rep, &LoadError{File: path, Err: fmt.Errorf("not a parquet file (it starts with %q, not the PAR1 magic)", magic[:n])}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return rep, fmt.Errorf("data: %w", err)
	}
	var r io.Reader = f
	if n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return rep, &LoadError{File: path, Err: fmt.Errorf("gzip: %w", err)}
		}
		defer gz.Close()
		r = gz
	}
	dirSource := SourceFromPath(path)
	return streamReader(r, path, opt, dirSource, fn)
}

// SourceFromPath infers a known data_source from a file's path: the
// folder (FlashRAG_datasets/hotpotqa/dev.jsonl), else the file name's
// stem or its part before the first "_", "-" or "." (nq_test.jsonl,
// 2wikimultihopqa-dev.jsonl.gz). It returns "" when nothing matches.
func SourceFromPath(path string) string {
	if d := filepath.Base(filepath.Dir(path)); knownSources[d] != "" {
		return d
	}
	base := strings.ToLower(filepath.Base(path))
	for _, ext := range []string{".gz", ".jsonl", ".json", ".parquet"} {
		base = strings.TrimSuffix(base, ext)
	}
	if knownSources[base] != "" {
		return base
	}
	if i := strings.IndexAny(base, "_-."); i > 0 && knownSources[base[:i]] != "" {
		return base[:i]
	}
	return ""
}

// StreamReader reads a JSON or JSONL dataset from r (parquet needs a file:
// use Stream); name is used in errors.
func StreamReader(r io.Reader, name string, opt LoadOptions, fn func(Sample) error) (Report, error) {
	return streamReader(r, name, opt, "", fn)
}

func streamReader(r io.Reader, name string, opt LoadOptions, dirSource string, fn func(Sample) error) (Report, error) {
	rep := Report{File: name, Format: opt.Format}
	if _, err := ParseFormat(string(opt.Format)); err != nil {
		return rep, err
	}
	if opt.DataSource != "" && !opt.knownSource(opt.DataSource) {
		return rep, fmt.Errorf("data: %s: data.data_source: %w %q (known: %s)", name, ErrUnknownSource, opt.DataSource, sourceList())
	}
	br := bufio.NewReaderSize(r, 1<<20)
	skipBOM(br)
	first, err := peekNonSpace(br)
	if err != nil {
		if err == io.EOF {
			return rep, &LoadError{File: name, Err: errors.New("empty file")}
		}
		return rep, &LoadError{File: name, Err: err}
	}
	ld := &loader{name: name, opt: opt, dirSource: dirSource, rep: &rep, fn: fn, ids: map[string]string{}}
	switch {
	case first == '[' && (opt.Format == FormatAuto || opt.Format == FormatHotpotQA || opt.Format == Format2Wiki):
		err = ld.readArray(br)
	case first != '[' && (opt.Format == FormatAuto || opt.Format == FormatMuSiQue || opt.Format == FormatFlashRAG):
		err = ld.readLines(br)
	case opt.Format == FormatParquet:
		err = &LoadError{File: name, Err: errors.New("parquet needs a file, not a stream (use Stream or Load)")}
	case first == '[':
		err = &LoadError{File: name, Err: fmt.Errorf("holds a JSON array, but format %s is JSONL", opt.Format)}
	default:
		err = &LoadError{File: name, Err: fmt.Errorf("format %s is one JSON array, but the file starts with %q", opt.Format, first)}
	}
	if errors.Is(err, ErrStop) {
		err = nil
	}
	return rep, err
}

func sourceList() string {
	names := make([]string, 0, len(knownSources))
	for k := range knownSources {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func skipBOM(br *bufio.Reader) {
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		br.Discard(3)
	}
}

// peekNonSpace returns the first byte that is not JSON white space,
// leaving it unread.
func peekNonSpace(br *bufio.Reader) (byte, error) {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if len(b) < i {
			return 0, err
		}
		if c := b[i-1]; !isSpace(c) {
			return c, nil
		}
		if i == br.Size() {
			br.Discard(i) // a buffer of white space: drop it and go on
			i = 0
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// loader holds the state of one stream: where it is, what it has seen.
type loader struct {
	name      string
	opt       LoadOptions
	dirSource string // a known data_source named by the file's folder, for FlashRAG
	rep       *Report
	fn        func(Sample) error
	decode    func(rec record) (Sample, *fieldError) // chosen by the first good record
	ids       map[string]string                      // sample id -> "line N" or "row N"
}

// fieldError is a record-level problem before the loader adds the place.
type fieldError struct {
	field string
	err   error
}

func fieldErr(field string, format string, args ...any) *fieldError {
	return &fieldError{field, fmt.Errorf(format, args...)}
}

func missing(field string) *fieldError { return &fieldError{field, ErrMissingField} }

// bad handles one bad record: fatal, or skipped and listed.
func (l *loader) bad(e *LoadError) error {
	if !l.opt.SkipMalformed {
		return e
	}
	l.rep.Skipped = append(l.rep.Skipped, e)
	return nil
}

// deliver checks a decoded sample's id and hands it over; where is the
// record's line (or row, for parquet).
func (l *loader) deliver(s Sample, where *LoadError) error {
	if prev, dup := l.ids[s.ID]; dup {
		where.Field, where.Err = "id", fmt.Errorf("%w %q, first seen on %s", ErrDuplicateID, s.ID, prev)
		return l.bad(where)
	}
	if where.Row > 0 {
		l.ids[s.ID] = "row " + strconv.Itoa(where.Row)
	} else {
		l.ids[s.ID] = "line " + strconv.Itoa(where.Line)
	}
	l.rep.Samples++
	return l.fn(s)
}
