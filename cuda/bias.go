package cuda

import "github.com/r1go/r1go/model"

var (
	kBiasForward  = kernel("bias.cu", "bias_forward", 256)
	kBiasBackward = kernel("bias.cu", "bias_backward", 256)

	// A bf16 out: the qkv projection stored in bf16 under mixed precision.
	kBiasForwardOBF16     = kernel("bias.cu", "bias_forward_obf16", 256)
	kBiasForwardBF16OBF16 = kernel("bias.cu", "bias_forward_bf16_obf16", 256)
)

// AddBias adds bias[cols] to every row of out[rows, ldo]. out is float32,
// or bf16 (the sum taken in float32 and rounded to bf16 again).
func (d *Device) AddBias(out model.Buffer, ldo int, bias model.Buffer, rows, cols int) {
	po, obf, _ := weightArg(out, (rows-1)*ldo+cols, "AddBias out")
	pb, bf, _ := weightArg(bias, cols, "AddBias bias")
	k := kBiasForward
	switch {
	case obf && bf:
		k = kBiasForwardBF16OBF16
	case obf:
		k = kBiasForwardOBF16
	case bf:
		k = kBiasForwardBF16 // a frozen bf16 model's bias (frozen.go)
	}
	defer d.enter()()
	d.launch(k, d.elementwiseGrid(rows*cols), grid1(256), 0, argPtr(po), argInt(ldo), argPtr(pb), argInt(rows), argInt(cols))
}

// BiasBackward accumulates dbias[cols] += column sums of dout[rows, ldo].
func (d *Device) BiasBackward(dbias model.Buffer, dout model.Buffer, ldo int, rows, cols int) {
	pd := f32(dbias, cols, "BiasBackward dbias")
	pg := f32(dout, (rows-1)*ldo+cols, "BiasBackward dout")
	defer d.enter()()
	d.launch(kBiasBackward, grid1(ceilDiv(cols, 32)), dim3{32, 8, 1}, 0, argPtr(pd), argPtr(pg), argInt(ldo), argInt(rows), argInt(cols))
}
