package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.tfevents (then run testdata/make_golden.sh)")

// fakeClock returns start, start+0.5 s, start+1 s, ... on successive calls.
func fakeClock(start float64) func() time.Time {
	n := 0
	return func() time.Time {
		t := start + 0.5*float64(n)
		n++
		sec := math.Floor(t)
		return time.Unix(int64(sec), int64((t-sec)*1e9))
	}
}

// goldenSteps is what the golden event file holds: a step 0 (proto3 leaves
// the field out), multi-byte varint steps, a tag longer than 127 bytes,
// non-ASCII tags, and float32 edge values.
var goldenSteps = []struct {
	step   int
	values map[string]float64
}{
	{0, map[string]float64{"val-core/hotpotqa/reward/mean@1": 0.125}},
	{1, map[string]float64{
		"critic/score/mean": 0.25, "actor/pg_loss": -0.0123, "actor/lr": 1e-6,
		"perf/total_num_tokens": 123456, "actor/ppo_kl": 1e-40, // a float32 subnormal
	}},
	{300, map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1), "big": 3.5e38}},
	{1 << 33, map[string]float64{strings.Repeat("long/", 30) + "tag": 7, "ünïcode/ß": -0.5}},
}

func writeGolden(t *testing.T, dir string) string {
	t.Helper()
	tb, err := createTensorBoard(dir, fakeClock(1763700000.25))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range goldenSteps {
		if err := tb.Log(s.step, s.values); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	return tb.Path()
}

type pyDump struct {
	Records []struct {
		Offset      int     `json:"offset"`
		WallTime    float64 `json:"wall_time"`
		Step        int64   `json:"step"`
		FileVersion string  `json:"file_version"`
		Values      []struct {
			Tag  string `json:"tag"`
			Bits string `json:"bits"`
		} `json:"values"`
	} `json:"records"`
}

// pyScalars flattens the Python reader's dump into Scalars and checks that
// the first record is the file version and every other holds one value.
func pyScalars(t *testing.T, raw []byte) []Scalar {
	t.Helper()
	var d pyDump
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Records) == 0 || d.Records[0].FileVersion != FileVersion || len(d.Records[0].Values) != 0 {
		t.Fatalf("python reader: first record is not the file version: %+v", d.Records)
	}
	var out []Scalar
	for _, r := range d.Records[1:] {
		if len(r.Values) != 1 {
			t.Fatalf("python reader: record at %d holds %d values, want 1", r.Offset, len(r.Values))
		}
		bits, err := strconv.ParseUint(r.Values[0].Bits, 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Scalar{r.WallTime, r.Step, r.Values[0].Tag, math.Float32frombits(uint32(bits))})
	}
	return out
}

// wantGolden is what goldenSteps must read back as: sorted tags per step,
// float32 values, the step's clock reading (the version event took 0.0).
func wantGolden() []Scalar {
	var want []Scalar
	for i, s := range goldenSteps {
		for _, k := range sortedKeys(s.values) {
			want = append(want, Scalar{1763700000.25 + 0.5*float64(i+1), int64(s.step), k, float32(s.values[k])})
		}
	}
	return want
}

func sameScalars(t *testing.T, who string, got, want []Scalar) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d scalars, want %d", who, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Tag != w.Tag || g.Step != w.Step || math.Float32bits(g.Value) != math.Float32bits(w.Value) ||
			math.Abs(g.WallTime-w.WallTime) > 1e-6 {
			t.Errorf("%s: scalar %d = %+v, want %+v", who, i, g, w)
		}
	}
}

func TestTensorBoardGolden(t *testing.T) {
	path := writeGolden(t, t.TempDir())
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/golden.tfevents", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile("testdata/golden.tfevents")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Errorf("event file differs from testdata/golden.tfevents (%d vs %d bytes)", len(got), len(golden))
	}
	// The committed dump of the independent Python reader is the reference.
	dump, err := os.ReadFile("testdata/golden.tfevents.json")
	if err != nil {
		t.Fatal(err)
	}
	sameScalars(t, "python reader golden", pyScalars(t, dump), wantGolden())
	scalars, err := ReadEvents("testdata/golden.tfevents")
	if err != nil {
		t.Fatal(err)
	}
	sameScalars(t, "ReadEvents golden", scalars, wantGolden())
}

// TestTensorBoardPython runs the committed Python reader on a file written
// now, when python3 is installed.
func TestTensorBoardPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	path := writeGolden(t, t.TempDir())
	out, err := exec.Command(py, "testdata/read_tfevents.py", path).Output()
	if err != nil {
		t.Fatalf("python reader: %v", err)
	}
	sameScalars(t, "python reader", pyScalars(t, out), wantGolden())

	// Google's protobuf runtime, where installed (Debian python3-protobuf),
	// must decode the events the same way.
	for _, pb := range []string{py, "/usr/bin/python3"} {
		if exec.Command(pb, "-c", "import google.protobuf").Run() != nil {
			continue
		}
		out, err := exec.Command(pb, "testdata/check_protobuf.py", path).Output()
		if err != nil {
			t.Fatalf("protobuf check: %v", err)
		}
		sameScalars(t, "protobuf runtime", pyScalars(t, out), wantGolden())
		t.Logf("protobuf runtime (%s) agrees", pb)
		break
	}

	// The Python reader must reject what ReadEvents rejects.
	data, _ := os.ReadFile(path)
	data[len(data)-10] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.tfevents")
	os.WriteFile(bad, data, 0o644)
	if err := exec.Command(py, "testdata/read_tfevents.py", bad).Run(); err == nil {
		t.Error("python reader accepted a flipped data bit")
	}
	if _, err := ReadEvents(bad); err == nil {
		t.Error("ReadEvents accepted a flipped data bit")
	}
}

func TestTensorBoardFileName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb", "proj", "exp")
	clock := func() time.Time { return time.Unix(1763700000, 0) }
	a, err := createTensorBoard(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	b, err := createTensorBoard(dir, clock) // same second: must not clobber a
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := filepath.Join(dir, "events.out.tfevents.1763700000."+host)
	if a.Path() != want || b.Path() != want+".1" {
		t.Errorf("paths %q, %q; want %q and %q", a.Path(), b.Path(), want, want+".1")
	}
	for _, tb := range []*TensorBoard{a, b} {
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		scalars, err := ReadEvents(tb.Path())
		if err != nil || len(scalars) != 0 {
			t.Errorf("%s: %v scalars, err %v; want none", tb.Path(), scalars, err)
		}
	}
}

func TestTensorBoardDir(t *testing.T) {
	t.Setenv("TENSORBOARD_DIR", "")
	if got, want := TensorBoardDir("p", "e"), filepath.Join("tensorboard_log", "p", "e"); got != want {
		t.Errorf("TensorBoardDir = %q, want %q", got, want)
	}
	t.Setenv("TENSORBOARD_DIR", "/tmp/tb")
	if got := TensorBoardDir("p", "e"); got != "/tmp/tb" {
		t.Errorf("with $TENSORBOARD_DIR: %q", got)
	}
}

// TestMaskedCRC checks CRC-32C against its published check values and the
// mask against the formula worked by hand for one of them.
func TestMaskedCRC(t *testing.T) {
	// CRC-32C("123456789") = 0xe3069283; rotated right by 15:
	// (0xe3069283 >> 15) = 0x1c60d, (0xe3069283 << 17) mod 2^32 = 0x25060000,
	// or'd = 0x2507c60d, + 0xa282ead8 = 0xc78ab0e5.
	if got := MaskedCRC([]byte("123456789")); got != 0xc78ab0e5 {
		t.Errorf("MaskedCRC(123456789) = %#x, want 0xc78ab0e5", got)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write(p []byte) (int, error) { return 0, f.err }

func TestTensorBoardErrors(t *testing.T) {
	if _, err := newTensorBoardWriter(failWriter{errors.New("disk full")}, "x.tfevents", time.Now); err == nil ||
		!strings.Contains(err.Error(), "x.tfevents") || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("version write error = %v", err)
	}
	dir := t.TempDir()
	tb, err := CreateTensorBoard(dir)
	if err != nil {
		t.Fatal(err)
	}
	tb.f.Close() // the file goes away under the sink
	err = tb.Log(1, map[string]float64{"a": 1})
	if err == nil || !strings.Contains(err.Error(), tb.Path()) || !strings.Contains(err.Error(), "tensorboard sink") {
		t.Errorf("write to closed file: %v", err)
	}
	tb.Close()
	if err := tb.Log(2, map[string]float64{"a": 1}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Log after Close: %v", err)
	}
	if _, err := CreateTensorBoard("/proc/definitely/not/here"); err == nil {
		t.Error("CreateTensorBoard in an impossible folder succeeded")
	}
}

// TestReadEventsCorrupt damages each part of a record and checks that the
// error names the file, the record and its offset.
func TestReadEventsCorrupt(t *testing.T) {
	good, err := os.ReadFile("testdata/golden.tfevents")
	if err != nil {
		t.Fatal(err)
	}
	// Record 1 starts after record 0 (the version event).
	n0 := int(uint64(good[0]) | uint64(good[1])<<8)
	r1 := recordOverhead + n0
	n1 := int(good[r1])
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"length bit", func(b []byte) []byte { b[r1] ^= 0x40; return b }, "length CRC mismatch"},
		{"length crc", func(b []byte) []byte { b[r1+9] ^= 1; return b }, "length CRC mismatch"},
		{"data bit", func(b []byte) []byte { b[r1+12+3] ^= 1; return b }, "data CRC mismatch"},
		{"data crc", func(b []byte) []byte { b[r1+12+n1] ^= 1; return b }, "data CRC mismatch"},
		{"cut in header", func(b []byte) []byte { return b[:r1+5] }, "truncated header"},
		{"cut in data", func(b []byte) []byte { return b[:r1+12+n1/2] }, "truncated"},
		{"cut in crc", func(b []byte) []byte { return b[:r1+12+n1+2] }, "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mutate(bytes.Clone(good))
			path := filepath.Join(t.TempDir(), "events.out.tfevents.1.host")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			scalars, err := ReadEvents(path)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []string{path, "record 1", fmt.Sprintf("offset %d", r1), c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if len(scalars) != 0 { // record 0 has no scalar
				t.Errorf("returned %d scalars before the bad record", len(scalars))
			}
		})
	}
}

// TestReadEventsProto checks the protobuf decoding on hand-built events: the
// fields in unusual order, unknown fields, and values without simple_value.
func TestReadEventsProto(t *testing.T) {
	// Event{summary{value{tag:"x", simple_value:2}}, step:5, wall_time:1.5,
	// field 99 varint}, fields written in reverse order.
	ev := []byte{
		0x2a, 0x0a, // summary, 10 bytes
		0x0a, 0x08, // value, 8 bytes
		0x0a, 0x01, 'x', // tag "x"
		0x15, 0x00, 0x00, 0x00, 0x40, // simple_value 2.0f
		0x10, 0x05, // step 5
		0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // wall_time 1.5
		0x98, 0x06, 0x07, // field 99 varint 7
	}
	// A histogram-only value: tag "h" and field 5 (histo) bytes, no simple_value.
	histo := []byte{0x2a, 0x07, 0x0a, 0x05, 0x0a, 0x01, 'h', 0x2a, 0x00}
	data := AppendRecord(AppendRecord(nil, ev), histo)
	got, err := readEvents(data, "mem")
	if err != nil {
		t.Fatal(err)
	}
	want := []Scalar{{1.5, 5, "x", 2}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A wrong wire type on a known field is an error naming the record.
	bad := AppendRecord(nil, []byte{0x10 | 1, 0, 0, 0, 0, 0, 0, 0, 0}) // step as fixed64
	if _, err := readEvents(bad, "mem"); err == nil || !strings.Contains(err.Error(), "record 0 at offset 0") {
		t.Errorf("wrong wire type: %v", err)
	}
}

// FuzzReadEvents feeds damaged event files to the reader: it must never
// panic, and every error must name the file and a record offset.
func FuzzReadEvents(f *testing.F) {
	good, err := os.ReadFile("testdata/golden.tfevents")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:40])
	f.Add([]byte{})
	f.Add(AppendRecord(nil, []byte{0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f}))
	huge := make([]byte, 12)
	huge[7] = 0x7f // length 2^62 with a valid length CRC
	f.Add(append(huge[:8:8], le32(MaskedCRC(huge[:8]))...))
	f.Fuzz(func(t *testing.T, data []byte) {
		scalars, err := readEvents(data, "fuzz.tfevents")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "metrics: fuzz.tfevents: record ") || !strings.Contains(err.Error(), " at offset ") {
				t.Fatalf("error without file and offset: %v", err)
			}
			return
		}
		for _, s := range scalars {
			if s.Tag == "" {
				t.Fatalf("scalar without a tag: %+v", s)
			}
		}
	})
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
