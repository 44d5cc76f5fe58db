package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// consoleCase is one entry of testdata/console_golden.json, made by
// console_ref.py with Python's own repr.
type consoleCase struct {
	Step   int               `json:"step"`
	Values map[string]string `json:"values"` // float.hex()
	Line   string            `json:"line"`
}

func loadConsoleGolden(t *testing.T) []consoleCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/console_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []consoleCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("console golden has %d cases", len(cases))
	}
	return cases
}

// pyHexFloat parses Python's float.hex(), which strconv reads except for
// its spelling of the non-finite values.
func pyHexFloat(t *testing.T, s string) float64 {
	t.Helper()
	switch s {
	case "nan":
		return math.NaN()
	case "inf":
		return math.Inf(1)
	case "-inf":
		return math.Inf(-1)
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("hex float %q: %v", s, err)
	}
	return x
}

func TestConsoleGolden(t *testing.T) {
	for _, c := range loadConsoleGolden(t) {
		values := map[string]float64{}
		for k, h := range c.Values {
			values[k] = pyHexFloat(t, h)
		}
		var buf bytes.Buffer
		con := NewConsole(&buf)
		if err := con.Log(c.Step, values); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != c.Line+"\n" {
			t.Errorf("step %d:\n got %q\nwant %q", c.Step, got, c.Line+"\n")
		}
	}
}

// TestFormatNumberRoundTrip checks that every finite number reads back to
// the same float64 and that the text has no superfluous characters.
func TestFormatNumberRoundTrip(t *testing.T) {
	xs := []float64{0.1, -0.3, 1e-300, 5e-324, 1.7976931348623157e308, 123.456, 1e15 + 0.25, 6.02e23, -1e-5}
	for i := 0; i < 200; i++ {
		xs = append(xs, math.Float64frombits(uint64(i)*0x9e3779b97f4a7c15))
	}
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		s := FormatNumber(x)
		y, err := strconv.ParseFloat(s, 64)
		if err != nil || y != x {
			t.Errorf("FormatNumber(%v) = %q reads back as %v, %v", x, s, y, err)
		}
		if strings.HasSuffix(s, ".0") || strings.Contains(s, "0e") {
			t.Errorf("FormatNumber(%v) = %q is not compact", x, s)
		}
	}
}

func TestConsoleErrors(t *testing.T) {
	con := NewConsole(failWriter{errors.New("broken pipe")})
	if err := con.Log(3, map[string]float64{"a": 1}); err == nil ||
		!strings.Contains(err.Error(), "console sink") || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("failing writer: %v", err)
	}
	con.Close()
	if err := con.Log(4, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Log after Close: %v", err)
	}
}
