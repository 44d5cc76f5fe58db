package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

var (
	kSwiGLUForward  = kernel("swiglu.cu", "swiglu_forward", 256)
	kSwiGLUBackward = kernel("swiglu.cu", "swiglu_backward", 256)

	// gu and out stored in bf16 under mixed precision: read widened,
	// computed in float32, the output rounded once.
	kSwiGLUForwardBF16    = kernel("swiglu.cu", "swiglu_forward_bf16", 256)
	kSwiGLUBackwardGuBF16 = kernel("swiglu.cu", "swiglu_backward_gubf16", 256)

	// dgu written in bf16 (mixed precision's gradient view: model's
	// MixedPrecision), rounded once from the float32 value.
	kSwiGLUBackwardDBF16   = kernel("swiglu.cu", "swiglu_backward_dbf16", 256)
	kSwiGLUBackwardGuDBF16 = kernel("swiglu.cu", "swiglu_backward_gubf16_dbf16", 256)
)

// SwiGLU: out[T, I] = silu(gu[:, :I]) ⊙ gu[:, I:], gu[T, 2I]. out and gu
// are both float32 or both bf16.
func (d *Device) SwiGLU(out, gu model.Buffer, rows, I int) {
	po, obf, _ := weightArg(out, rows*I, "SwiGLU out")
	pg, gbf, _ := weightArg(gu, rows*2*I, "SwiGLU gu")
	if obf != gbf {
		panic(fmt.Sprintf("cuda: SwiGLU of a %s gu into a %s out; both must have one type", gu.(Buffer).dtype, out.(Buffer).dtype))
	}
	k := kSwiGLUForward
	if gbf {
		k = kSwiGLUForwardBF16
	}
	defer d.enter()()
	d.launch(k, d.elementwiseGrid(rows*I), grid1(256), 0, argPtr(po), argPtr(pg), argInt(rows), argInt(I))
}

// SwiGLUBackward sets dgu from dout; gu is float32 or bf16, dout float32
// and dgu float32 or bf16. A bf16 dgu is mixed precision's gradient in
// compute storage (model.MixedPrecision): its only readers are the two
// matmuls, which take it as it is instead of rounding a float32 dgu each.
func (d *Device) SwiGLUBackward(dgu, dout, gu model.Buffer, rows, I int) {
	pd, dbf, _ := weightArg(dgu, rows*2*I, "SwiGLUBackward dgu")
	py := f32(dout, rows*I, "SwiGLUBackward dout")
	pg, gbf, _ := weightArg(gu, rows*2*I, "SwiGLUBackward gu")
	k := kSwiGLUBackward
	switch {
	case gbf && dbf:
		k = kSwiGLUBackwardGuDBF16
	case gbf:
		k = kSwiGLUBackwardGuBF16
	case dbf:
		k = kSwiGLUBackwardDBF16
	}
	defer d.enter()()
	d.launch(k, d.elementwiseGrid(rows*I), grid1(256), 0, argPtr(pd), argPtr(py), argPtr(pg), argInt(rows), argInt(I))
}
