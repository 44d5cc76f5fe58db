package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// bfloat16 on the device: the top 16 bits of an IEEE float32 (host-side
// conversion is package internal/bf16's). The GPU keeps compute copies of
// weights and activations in bf16 (half the memory and bandwidth,
// tensor-core inputs) while master weights, optimizer moments and
// accumulations stay float32.

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
