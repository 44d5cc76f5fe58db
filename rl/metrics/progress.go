package metrics

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/schollz/progressbar/v3"
)

// Progress draws a progress bar over the run's steps, with the count, the
// rate, the elapsed time and the time left (the ETA), and beside it the latest
// values of a few chosen metrics:
//
//	score/mean 0.4938  40% |████████████                  | (40/100, 2 step/min) [20m0s:30m0s]
//
// The bar redraws in place with carriage returns, so give it a terminal
// (os.Stderr) and keep the console sink on another stream or off.
type Progress struct {
	w      io.Writer
	bar    *progressbar.ProgressBar
	total  int
	keys   []string
	closed bool
	desc   strings.Builder
}

// NewProgress returns a bar of total steps (total > 0) writing to w, showing
// the latest value of each of keys ("critic/score/mean", ...) to four
// significant digits as its description, labelled by the key without its
// first path element ("score/mean").
func NewProgress(w io.Writer, total int, keys ...string) *Progress {
	total = max(total, 1) // the library treats -1 as "unknown length" and spins a goroutine
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("train"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("step"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(30),
	)
	return &Progress{w: w, bar: bar, total: total, keys: keys}
}

// Name reports "progress".
func (p *Progress) Name() string { return "progress" }

// Log moves the bar to step (clamped to the total) and updates its description.
func (p *Progress) Log(step int, values map[string]float64) error {
	if p.closed {
		return fmt.Errorf("metrics: progress sink: step %d: closed", step)
	}
	if len(p.keys) > 0 {
		p.desc.Reset()
		for _, k := range p.keys {
			v, ok := values[k]
			if !ok {
				continue
			}
			if p.desc.Len() > 0 {
				p.desc.WriteByte(' ')
			}
			p.desc.WriteString(shortLabel(k))
			p.desc.WriteByte(' ')
			p.desc.WriteString(FormatNumber(roundForDisplay(v)))
		}
		if p.desc.Len() > 0 {
			p.bar.Describe(p.desc.String())
		}
	}
	if err := p.bar.Set(min(step, p.total)); err != nil {
		return fmt.Errorf("metrics: progress sink: step %d: %w", step, err)
	}
	return nil
}

// Close ends the bar's line so that later output starts on a fresh one.
func (p *Progress) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.bar.Exit(); err != nil {
		return fmt.Errorf("metrics: progress sink: %w", err)
	}
	if _, err := io.WriteString(p.w, "\n"); err != nil {
		return fmt.Errorf("metrics: progress sink: %w", err)
	}
	return nil
}

// shortLabel turns "critic/score/mean" into "score/mean" and "actor/lr" into
// "lr": the part after the first slash, which is what tells metrics apart.
func shortLabel(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 && i+1 < len(key) {
		return key[i+1:]
	}
	return key
}

// roundForDisplay keeps four significant digits, enough to follow a run by eye.
func roundForDisplay(v float64) float64 {
	x, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if err != nil { // ±Inf and NaN read back; nothing else fails
		return v
	}
	return x
}
