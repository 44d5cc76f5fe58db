package cuda

import "github.com/r1go/r1go/model"

var kResidual = kernel("residual.cu", "residual_forward", 256)

// Add sets out = a + b elementwise (out may alias a or b).
func (d *Device) Add(out, a, b model.Buffer) {
	n := out.Len()
	if a.Len() != n || b.Len() != n {
		panic("cuda: Add of buffers with different lengths")
	}
	po, pa, pb := f32(out, n, "Add out"), f32(a, n, "Add a"), f32(b, n, "Add b")
	defer d.enter()()
	d.launch(kResidual, d.elementwiseGrid(n), grid1(256), 0, argPtr(po), argPtr(pa), argPtr(pb), argInt64(n))
}
