package metrics

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// A Sink receives every step's metrics from a Logger. Log must not keep
// values after it returns (the trainer reuses the map). Errors start with
// "metrics: " and name the sink, its file and the step.
type Sink interface {
	// Name is the sink's kind and destination, e.g. "jsonl /runs/a/metrics.jsonl".
	Name() string
	Log(step int, values map[string]float64) error
	// Close flushes and releases the sink; a Log after Close is an error.
	Close() error
}

// Logger fans one step's metrics out to its sinks. A failing sink does not
// stop the others: Log hands every sink the step and returns all failures
// joined. A Logger is safe for concurrent use; calls are serialised.
type Logger struct {
	mu     sync.Mutex
	sinks  []Sink
	closed bool
}

// New returns a Logger writing to the given sinks, in that order.
func New(sinks ...Sink) *Logger {
	return &Logger{sinks: sinks}
}

// Null returns a Logger with no sinks, for tests and for runs that log nothing.
func Null() *Logger { return New() }

// Sinks returns the logger's sinks (not a copy).
func (l *Logger) Sinks() []Sink { return l.sinks }

// Log sends one step's metrics to every sink. Keys must be non-empty; values
// may be any float64 including NaN and ±Inf (each sink says how it writes them).
func (l *Logger) Log(step int, values map[string]float64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("metrics: Log at step %d after Close", step)
	}
	if step < 0 {
		return fmt.Errorf("metrics: negative step %d", step)
	}
	for k := range values {
		if k == "" {
			return fmt.Errorf("metrics: step %d: empty metric name", step)
		}
	}
	var errs []error
	for _, s := range l.sinks {
		if err := s.Log(step, values); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close flushes and closes every sink, returning all failures joined. A
// second Close does nothing.
func (l *Logger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, s := range l.sinks {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sink kinds accepted by Config.Sinks, after verl's trainer.logger list.
const (
	SinkConsole     = "console"
	SinkJSONL       = "jsonl"
	SinkTensorBoard = "tensorboard"
	SinkProgress    = "progress"
)

// Config chooses a Logger's sinks the way verl's trainer.logger does.
type Config struct {
	Sinks []string // any of "console", "jsonl", "tensorboard", "progress"

	Console io.Writer // console lines; nil means os.Stdout

	JSONLPath string // file for "jsonl"; empty means <Dir>/metrics.jsonl
	Dir       string // run folder for the default JSONL path

	// TensorBoardDir is the folder for event files; empty means
	// TensorBoardDir(Project, Experiment).
	TensorBoardDir      string
	Project, Experiment string

	TotalSteps   int       // the progress bar's length
	Progress     io.Writer // the progress bar; nil means os.Stderr
	ProgressKeys []string  // metrics shown beside the bar, e.g. "critic/score/mean"
}

// Open builds the Logger cfg asks for. On error every sink opened so far is
// closed again.
func Open(cfg Config) (*Logger, error) {
	var sinks []Sink
	fail := func(err error) (*Logger, error) {
		for _, s := range sinks {
			s.Close()
		}
		return nil, err
	}
	seen := map[string]bool{}
	for _, kind := range cfg.Sinks {
		if seen[kind] {
			return fail(fmt.Errorf("metrics: sink %q listed twice", kind))
		}
		seen[kind] = true
		switch kind {
		case SinkConsole:
			w := cfg.Console
			if w == nil {
				w = os.Stdout
			}
			sinks = append(sinks, NewConsole(w))
		case SinkJSONL:
			path := cfg.JSONLPath
			if path == "" {
				if cfg.Dir == "" {
					return fail(errors.New("metrics: jsonl sink needs Config.JSONLPath or Config.Dir"))
				}
				path = filepath.Join(cfg.Dir, "metrics.jsonl")
			}
			s, err := CreateJSONL(path)
			if err != nil {
				return fail(err)
			}
			sinks = append(sinks, s)
		case SinkTensorBoard:
			dir := cfg.TensorBoardDir
			if dir == "" {
				dir = TensorBoardDir(cfg.Project, cfg.Experiment)
			}
			s, err := CreateTensorBoard(dir)
			if err != nil {
				return fail(err)
			}
			sinks = append(sinks, s)
		case SinkProgress:
			w := cfg.Progress
			if w == nil {
				w = os.Stderr
			}
			if cfg.TotalSteps <= 0 {
				return fail(fmt.Errorf("metrics: progress sink needs Config.TotalSteps > 0, have %d", cfg.TotalSteps))
			}
			sinks = append(sinks, NewProgress(w, cfg.TotalSteps, cfg.ProgressKeys...))
		default:
			return fail(fmt.Errorf("metrics: unknown sink %q (want console, jsonl, tensorboard or progress)", kind))
		}
	}
	return New(sinks...), nil
}
