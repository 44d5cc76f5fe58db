package cuda

import "github.com/r1go/r1go/model"

var (
	kSwiGLUForward  = kernel("swiglu.cu", "swiglu_forward", 256)
	kSwiGLUBackward = kernel("swiglu.cu", "swiglu_backward", 256)
)

// SwiGLU: out[T, I] = silu(gu[:, :I]) ⊙ gu[:, I:], gu[T, 2I].
func (d *Device) SwiGLU(out, gu model.Buffer, rows, I int) {
	po, pg := f32(out, rows*I, "SwiGLU out"), f32(gu, rows*2*I, "SwiGLU gu")
	defer d.enter()()
	d.launch(kSwiGLUForward, d.elementwiseGrid(rows*I), grid1(256), 0, argPtr(po), argPtr(pg), argInt(rows), argInt(I))
}

// SwiGLUBackward sets dgu from dout.
func (d *Device) SwiGLUBackward(dgu, dout, gu model.Buffer, rows, I int) {
	pd, py, pg := f32(dgu, rows*2*I, "SwiGLUBackward dgu"), f32(dout, rows*I, "SwiGLUBackward dout"), f32(gu, rows*2*I, "SwiGLUBackward gu")
	defer d.enter()()
	d.launch(kSwiGLUBackward, d.elementwiseGrid(rows*I), grid1(256), 0, argPtr(pd), argPtr(py), argPtr(pg), argInt(rows), argInt(I))
}
