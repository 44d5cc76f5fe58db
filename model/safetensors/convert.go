package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/r1go/r1go/internal/bf16"
)

// F16ToF32 widens an IEEE binary16 bit pattern: subnormals are normalised,
// Inf stays Inf, and a NaN keeps its sign and payload and becomes quiet.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp != 0 && exp != 0x1f:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case exp == 0x1f && mant == 0:
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign) // ±0
	}
	// Subnormal: value = mant * 2^-24; shift the leading one up to bit 10.
	e := int32(-14)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | uint32(e+127)<<23 | (mant&0x3ff)<<13)
}

// F32ToF16 rounds to the nearest IEEE binary16, ties to even, including
// into and out of the subnormal range; values from 65520 up become Inf. A
// NaN keeps its sign and top payload bits and becomes quiet.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	e := exp - 127
	if e >= -14 && e <= 15 {
		// Normal range, rounded without a branch: adding 0xfff plus the
		// kept lowest bit carries into bit 13 exactly when the dropped bits
		// exceed half, or equal half with an odd kept part. A carry out of
		// the mantissa bumps the exponent, which is right, and turns 65520
		// and above into 0x7c00 (Inf).
		m := mant + 0x0fff + (mant>>13)&1
		return sign | uint16(uint32(e+15)<<10+m>>13)
	}
	switch {
	case exp == 0xff && mant != 0:
		return sign | 0x7e00 | uint16(mant>>13)
	case e > 15:
		return sign | 0x7c00
	case e < -25:
		return sign // below half the smallest subnormal (2^-25): zero
	}
	// Subnormal result in units of 2^-24: m * 2^(e-23) / 2^-24 = m >> -(e+1).
	m := mant | 0x800000
	shift := uint(-e - 1)
	h := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// DecodeF32 converts src, little-endian elements of dtype d, into dst.
// len(src) must be len(dst) times the element size.
func DecodeF32(dst []float32, src []byte, d DType) error {
	if !d.Known() {
		return fmt.Errorf("safetensors: %w %q", ErrUnknownDType, string(d))
	}
	if !d.Float() {
		return fmt.Errorf("safetensors: %w: %s", ErrUnsupportedDType, d)
	}
	if len(src) != len(dst)*d.Size() {
		return fmt.Errorf("safetensors: %w: %d bytes of %s for %d values", ErrLength, len(src), d, len(dst))
	}
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = bf16.ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

// EncodeF32 converts src into dst as little-endian elements of dtype d,
// rounding to nearest even. len(dst) must be len(src) times the element size.
func EncodeF32(dst []byte, src []float32, d DType) error {
	if !d.Known() {
		return fmt.Errorf("safetensors: %w %q", ErrUnknownDType, string(d))
	}
	if !d.Float() {
		return fmt.Errorf("safetensors: %w: %s", ErrUnsupportedDType, d)
	}
	if len(dst) != len(src)*d.Size() {
		return fmt.Errorf("safetensors: %w: %d bytes of %s for %d values", ErrLength, len(dst), d, len(src))
	}
	switch d {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], bf16.FromFloat32(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	}
	return nil
}
