package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Console writes one line per step in verl's console format,
//
//	step:12 - actor/entropy:0.4375 - critic/score/mean:0.25 - timing_s/gen:3.1
//
// with the keys sorted (verl keeps dict order; sorted lines diff well) and
// the numbers as FormatNumber writes them. Each line is one Write call.
type Console struct {
	w      io.Writer
	buf    []byte
	closed bool
}

// NewConsole returns a console sink writing to w (usually os.Stdout).
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

// Name reports "console".
func (c *Console) Name() string { return "console" }

// Log writes the step's line.
func (c *Console) Log(step int, values map[string]float64) error {
	if c.closed {
		return fmt.Errorf("metrics: console sink: step %d: closed", step)
	}
	c.buf = AppendConsoleLine(c.buf[:0], step, values)
	if _, err := c.w.Write(c.buf); err != nil {
		return fmt.Errorf("metrics: console sink: step %d: %w", step, err)
	}
	return nil
}

// Close marks the sink closed; the writer belongs to the caller and stays open.
func (c *Console) Close() error {
	c.closed = true
	return nil
}

// AppendConsoleLine appends the verl console line for one step, with its
// trailing newline, to b.
func AppendConsoleLine(b []byte, step int, values map[string]float64) []byte {
	b = append(b, "step:"...)
	b = strconv.AppendInt(b, int64(step), 10)
	for _, k := range sortedKeys(values) {
		b = append(b, " - "...)
		b = append(b, k...)
		b = append(b, ':')
		b = AppendNumber(b, values[k])
	}
	return append(b, '\n')
}

// FormatNumber writes x compactly: an integral value below 1e16 in magnitude
// as an integer ("12", "0"), as verl prints Python ints such as token counts;
// anything else as Python's repr of a float ("0.25", "1e-05", "1.5e+16",
// "nan", "inf", "-inf"): the shortest digits that read back to the same
// float64, in exponent form when the decimal exponent is below -4 or above 15.
// Negative zero is written "0", like Python's int(-0.0).
func FormatNumber(x float64) string { return string(AppendNumber(nil, x)) }

// AppendNumber appends FormatNumber(x) to b.
func AppendNumber(b []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(b, "nan"...)
	case math.IsInf(x, 1):
		return append(b, "inf"...)
	case math.IsInf(x, -1):
		return append(b, "-inf"...)
	case x == math.Trunc(x) && math.Abs(x) < 1e16:
		return strconv.AppendInt(b, int64(x), 10)
	}
	// Python's repr switches to exponent form when the position of the
	// decimal point, counted from the first significant digit, is at most -4
	// or above 16; that position is the 'e' form's exponent plus one.
	e := strconv.FormatFloat(x, 'e', -1, 64)
	exp, err := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if err != nil { // cannot happen: 'e' format always ends in an exponent
		panic("metrics: FormatFloat gave " + e)
	}
	if decpt := exp + 1; decpt <= -4 || decpt > 16 {
		return append(b, e...)
	}
	return strconv.AppendFloat(b, x, 'f', -1, 64)
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
