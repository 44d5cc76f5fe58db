package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// Scalar is one scalar summary value read from an event file.
type Scalar struct {
	WallTime float64 // seconds since the Unix epoch
	Step     int64
	Tag      string
	Value    float32 // TensorFlow's simple_value is a float32
}

// ReadEvents reads every scalar (Summary.Value with simple_value) from a
// TensorFlow event file, in file order. It checks both CRCs of every record
// and decodes the Event protobuf; events of other kinds (file_version,
// histograms, tensors) and unknown fields are skipped. A corrupt or
// truncated record is an error naming the file, the record's index and its
// byte offset; the scalars before it are returned with the error.
func ReadEvents(path string) ([]Scalar, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return readEvents(data, path)
}

// recordOverhead is the framing around a record's data: the 8-byte length,
// its 4-byte CRC and the data's 4-byte CRC.
const recordOverhead = 8 + 4 + 4

func readEvents(data []byte, name string) ([]Scalar, error) {
	var out []Scalar
	off := 0
	for rec := 0; off < len(data); rec++ {
		fail := func(format string, args ...any) ([]Scalar, error) {
			return out, fmt.Errorf("metrics: %s: record %d at offset %d: %s", name, rec, off, fmt.Sprintf(format, args...))
		}
		rest := data[off:]
		if len(rest) < 12 {
			return fail("truncated header: %d bytes left, a header needs 12", len(rest))
		}
		n := binary.LittleEndian.Uint64(rest[:8])
		if stored, got := binary.LittleEndian.Uint32(rest[8:12]), MaskedCRC(rest[:8]); stored != got {
			return fail("length CRC mismatch: stored %#08x, computed %#08x", stored, got)
		}
		// The data and its 4-byte CRC must fit in what follows the header.
		if follow := uint64(len(rest) - 12); follow < 4 || n > follow-4 {
			return fail("truncated: data length %d and its 4-byte CRC, but %d bytes follow the header", n, follow)
		}
		body := rest[12 : 12+n]
		if stored, got := binary.LittleEndian.Uint32(rest[12+n:16+n]), MaskedCRC(body); stored != got {
			return fail("data CRC mismatch: stored %#08x, computed %#08x", stored, got)
		}
		var err error
		if out, err = decodeEvent(out, body); err != nil {
			return fail("event: %v", err)
		}
		off += recordOverhead + int(n)
	}
	return out, nil
}

// decodeEvent appends the scalars of one serialised tensorflow.Event.
func decodeEvent(out []Scalar, b []byte) ([]Scalar, error) {
	var wall float64
	var step int64
	var summaries [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return out, fmt.Errorf("tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return out, fieldError("wall_time", n)
			}
			wall, b = math.Float64frombits(v), b[n:]
		case num == eventStep && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return out, fieldError("step", n)
			}
			step, b = int64(v), b[n:]
		case num == eventSummary && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return out, fieldError("summary", n)
			}
			summaries, b = append(summaries, v), b[n:]
		case num == eventWallTime || num == eventStep || num == eventSummary:
			return out, fmt.Errorf("field %d has wire type %d", num, typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return out, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	// The step and wall time may follow the summary on the wire, so values
	// are built only once the whole event is read.
	for _, s := range summaries {
		var err error
		if out, err = decodeSummary(out, s, wall, step); err != nil {
			return out, err
		}
	}
	return out, nil
}

func decodeSummary(out []Scalar, b []byte, wall float64, step int64) ([]Scalar, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return out, fmt.Errorf("summary tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != summaryValue || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return out, fmt.Errorf("summary field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return out, fieldError("summary.value", n)
		}
		b = b[n:]
		s, ok, err := decodeValue(v)
		if err != nil {
			return out, err
		}
		if ok {
			s.WallTime, s.Step = wall, step
			out = append(out, s)
		}
	}
	return out, nil
}

// decodeValue reads a Summary.Value; ok is false when it holds no simple_value.
func decodeValue(b []byte) (s Scalar, ok bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, false, fmt.Errorf("value tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == valueTag && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, false, fieldError("value.tag", n)
			}
			s.Tag, b = string(v), b[n:]
		case num == valueSimpleValue && typ == protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return s, false, fieldError("value.simple_value", n)
			}
			s.Value, ok, b = math.Float32frombits(v), true, b[n:]
		case num == valueTag || num == valueSimpleValue:
			return s, false, fmt.Errorf("value field %d has wire type %d", num, typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return s, false, fmt.Errorf("value field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if ok && s.Tag == "" {
		return s, false, errors.New("scalar value without a tag")
	}
	return s, ok, nil
}

func fieldError(field string, n int) error {
	return fmt.Errorf("%s: %w", field, protowire.ParseError(n))
}
