package cuda

import "github.com/r1go/r1go/model"

var (
	kBiasForward  = kernel("bias.cu", "bias_forward", 256)
	kBiasBackward = kernel("bias.cu", "bias_backward", 256)
)

// AddBias adds bias[cols] to every row of out[rows, ldo].
func (d *Device) AddBias(out model.Buffer, ldo int, bias model.Buffer, rows, cols int) {
	po := f32(out, (rows-1)*ldo+cols, "AddBias out")
	pb, bf, _ := weightArg(bias, cols, "AddBias bias")
	k := kBiasForward
	if bf {
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
