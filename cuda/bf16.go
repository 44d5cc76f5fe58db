package cuda

import (
	"fmt"
	"math"

	"github.com/r1go/r1go/model"
)

// Host-side bfloat16: the top 16 bits of an IEEE float32. The GPU keeps
// compute copies of weights and activations in bf16 (half the memory and
// bandwidth, tensor-core inputs) while master weights, optimizer moments
// and accumulations stay float32.

// BF16FromFloat32 rounds f to the nearest bf16, ties to even. NaN stays NaN
// (quieted), ±Inf stays ±Inf, and values past the largest bf16 round to Inf.
func BF16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// Float32FromBF16 widens a bf16 exactly.
func Float32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16Round is f rounded through bf16: the value a bf16 buffer would hold.
func BF16Round(f float32) float32 { return Float32FromBF16(BF16FromFloat32(f)) }

var (
	kToBF16 = kernel("convert.cu", "convert_f32_bf16", 256)
	kToF32  = kernel("convert.cu", "convert_bf16_f32", 256)
)

// Convert copies src into dst converting between f32 and bf16 (rounding to
// nearest even on the way down): it makes the bf16 compute copy of fp32
// master weights, and reads bf16 buffers back as fp32.
func (d *Device) Convert(dst, src Buffer) {
	if dst.n != src.n {
		panic(fmt.Sprintf("cuda: Convert of %d values into %d", src.n, dst.n))
	}
	defer d.enter()()
	switch {
	case dst.dtype == BF16 && src.dtype == F32:
		d.launch(kToBF16, d.elementwiseGrid(dst.n), grid1(256), 0, argPtr(dst.ptr), argPtr(src.ptr), argInt64(dst.n))
	case dst.dtype == F32 && src.dtype == BF16:
		d.launch(kToF32, d.elementwiseGrid(dst.n), grid1(256), 0, argPtr(dst.ptr), argPtr(src.ptr), argInt64(dst.n))
	default:
		panic(fmt.Sprintf("cuda: Convert from %s to %s", src.dtype, dst.dtype))
	}
}

var _ model.Buffer = Buffer{}
