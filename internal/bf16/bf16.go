// Package bf16 converts between float32 and bfloat16, the top 16 bits of an
// IEEE float32: the one rounding and widening that the CPU device, the CUDA
// device's host side and the safetensors reader and writer share, so that a
// value rounded in one place reads back the same everywhere.
package bf16

import "math"

// FromFloat32 rounds f to the nearest bfloat16, ties to even, as PyTorch
// does. Values past the largest bfloat16 become ±Inf. A NaN stays a NaN:
// its sign and top payload bits are kept and the quiet bit is set, because
// plain truncation could turn a NaN whose payload sits in the low 16 bits
// into an infinity.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// ToFloat32 widens a bfloat16 bit pattern; every bfloat16 value, NaN
// payloads included, is exactly representable in float32.
func ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Round is f rounded through bfloat16: the value a bf16 buffer would hold.
func Round(f float32) float32 { return ToFloat32(FromFloat32(f)) }
