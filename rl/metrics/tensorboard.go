package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TensorBoard writes TensorFlow event files that TensorBoard reads. No Go
// module writes them without the TensorFlow C library, so this is the format
// itself: a file of TFRecords, each holding one serialised tensorflow.Event.
// The first record carries file_version "brain.Event:2"; then each metric of
// each step is one Event{wall_time, step, summary{value{tag, simple_value}}}.
// simple_value is a float32, as in TensorFlow; the step's records go to the
// file in one write.
type TensorBoard struct {
	path string
	w    io.Writer
	f    *os.File // nil when writing to a plain io.Writer in tests
	now  func() time.Time
	buf  []byte
	ev   []byte
}

// Event file layout (tensorflow/core/util/event.proto, summary.proto).
const (
	eventWallTime    protowire.Number = 1 // double
	eventStep        protowire.Number = 2 // int64
	eventFileVersion protowire.Number = 3 // string
	eventSummary     protowire.Number = 5 // Summary

	summaryValue protowire.Number = 1 // repeated Summary.Value

	valueTag         protowire.Number = 1 // string
	valueSimpleValue protowire.Number = 2 // float

	// FileVersion is the version string of the first event in every file.
	FileVersion = "brain.Event:2"
)

// TensorBoardDir is where verl puts event files: $TENSORBOARD_DIR when set,
// else tensorboard_log/{project}/{experiment} under the working directory.
func TensorBoardDir(project, experiment string) string {
	if dir := os.Getenv("TENSORBOARD_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("tensorboard_log", project, experiment)
}

// CreateTensorBoard creates dir if needed and a new event file in it named
// events.out.tfevents.<unix seconds>.<hostname>, the name TensorFlow's
// writer uses. It never overwrites a file: when two writers start in the same
// second it appends ".1", ".2", ... (TensorBoard reads any name containing
// "tfevents").
func CreateTensorBoard(dir string) (*TensorBoard, error) {
	return createTensorBoard(dir, time.Now)
}

func createTensorBoard(dir string, now func() time.Time) (*TensorBoard, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metrics: tensorboard sink %s: %w", dir, err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	start := now() // names the file and stamps its first event
	base := filepath.Join(dir, "events.out.tfevents."+strconv.FormatInt(start.Unix(), 10)+"."+host)
	path := base
	var f *os.File
	for i := 1; ; i++ {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return nil, fmt.Errorf("metrics: tensorboard sink %s: %w", path, err)
		}
		path = base + "." + strconv.Itoa(i)
	}
	tb := &TensorBoard{path: path, w: f, f: f, now: now}
	if err := tb.writeVersion(start); err != nil {
		f.Close()
		return nil, err
	}
	return tb, nil
}

// newTensorBoardWriter writes an event file to w; for tests of failing writers.
func newTensorBoardWriter(w io.Writer, name string, now func() time.Time) (*TensorBoard, error) {
	tb := &TensorBoard{path: name, w: w, now: now}
	return tb, tb.writeVersion(now())
}

func (tb *TensorBoard) writeVersion(start time.Time) error {
	ev := appendWallTime(nil, start)
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, FileVersion)
	if _, err := tb.w.Write(AppendRecord(nil, ev)); err != nil {
		return fmt.Errorf("metrics: tensorboard sink %s: %w", tb.path, err)
	}
	return nil
}

// Name reports "tensorboard <path>".
func (tb *TensorBoard) Name() string { return "tensorboard " + tb.path }

// Path is the event file being written.
func (tb *TensorBoard) Path() string { return tb.path }

// Log appends one scalar event per metric, in sorted key order.
func (tb *TensorBoard) Log(step int, values map[string]float64) error {
	if tb.w == nil {
		return fmt.Errorf("metrics: tensorboard sink %s: step %d: closed", tb.path, step)
	}
	if len(values) == 0 {
		return nil
	}
	wall := tb.now()
	tb.buf = tb.buf[:0]
	for _, k := range sortedKeys(values) {
		tb.ev = appendScalarEvent(tb.ev[:0], wall, int64(step), k, float32(values[k]))
		tb.buf = AppendRecord(tb.buf, tb.ev)
	}
	if _, err := tb.w.Write(tb.buf); err != nil {
		return fmt.Errorf("metrics: tensorboard sink %s: step %d: %w", tb.path, step, err)
	}
	return nil
}

// Close syncs the event file to disk and closes it.
func (tb *TensorBoard) Close() error {
	if tb.w == nil {
		return nil
	}
	tb.w = nil
	if tb.f == nil {
		return nil
	}
	serr := tb.f.Sync()
	cerr := tb.f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("metrics: tensorboard sink %s: close: %w", tb.path, err)
	}
	return nil
}

func appendWallTime(b []byte, t time.Time) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(float64(t.Unix())+float64(t.Nanosecond())/1e9))
}

// appendScalarEvent appends the serialised Event for one scalar, its fields in
// field-number order as protobuf encoders write them.
func appendScalarEvent(b []byte, wall time.Time, step int64, tag string, v float32) []byte {
	b = appendWallTime(b, wall)
	if step != 0 { // proto3 leaves a zero scalar out
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(step))
	}
	valueLen := protowire.SizeTag(valueTag) + protowire.SizeBytes(len(tag)) +
		protowire.SizeTag(valueSimpleValue) + protowire.SizeFixed32()
	summaryLen := protowire.SizeTag(summaryValue) + protowire.SizeBytes(valueLen)
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(summaryLen))
	b = protowire.AppendTag(b, summaryValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(valueLen))
	b = protowire.AppendTag(b, valueTag, protowire.BytesType)
	b = protowire.AppendString(b, tag)
	b = protowire.AppendTag(b, valueSimpleValue, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's checksum: CRC-32C of p, rotated right by 15 bits
// and offset by a constant, so that a CRC over data holding CRCs stays strong.
func MaskedCRC(p []byte) uint32 {
	c := crc32.Checksum(p, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// AppendRecord appends data framed as a TFRecord: the length as a
// little-endian uint64, the masked CRC of those 8 bytes, the data, and the
// masked CRC of the data (both CRCs little-endian uint32).
func AppendRecord(b, data []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, MaskedCRC(b[len(b)-8:]))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, MaskedCRC(data))
}
