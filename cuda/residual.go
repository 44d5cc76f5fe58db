package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

var (
	kResidual     = kernel("residual.cu", "residual_forward", 256)
	kResidualBF16 = kernel("residual.cu", "residual_forward_bf16", 256)
)

// Add sets out = a + b elementwise (out may alias a or b). All three are
// float32, or out and a are bf16 (the residual stream in compute storage
// under mixed precision, activations.go of package model) and b, a branch
// output, float32: the sum is taken in float32 and rounded once.
func (d *Device) Add(out, a, b model.Buffer) {
	n := out.Len()
	if a.Len() != n || b.Len() != n {
		panic("cuda: Add of buffers with different lengths")
	}
	po, obf, _ := weightArg(out, n, "Add out")
	pa, abf, _ := weightArg(a, n, "Add a")
	pb := f32(b, n, "Add b")
	k := kResidual
	switch {
	case obf && abf:
		k = kResidualBF16
	case obf || abf:
		panic(fmt.Sprintf("cuda: Add of a %s a into a %s out; a bf16 residual stream keeps both bf16", a.(Buffer).dtype, out.(Buffer).dtype))
	}
	defer d.enter()()
	d.launch(k, d.elementwiseGrid(n), grid1(256), 0, argPtr(po), argPtr(pa), argPtr(pb), argInt64(n))
}
