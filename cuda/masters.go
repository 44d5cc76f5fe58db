package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Sharded master weights. Under ZeRO on a mixed-precision Device a rank
// updates the fp32 masters of its shard only, and every matmul and the
// embedding read the bf16 compute copy; so the masters outside the shard
// can be given back (ReleasePages) as long as the copy is written from the
// gathered fp32 values directly (SetCompute) and the tensors the Device
// reads in fp32 (norm weights, biases) stay. ComputeCopy lets host code
// read the bf16 copy of weights whose masters are gone.

// SetCompute writes the bf16 compute copy of the registered weights w
// (a view into a UseBF16 arena) from the float32 values src, rounded to
// nearest even, without reading or writing w's float32 values. It reports
// false when w is not registered. It satisfies model.ComputeCopier.
func (d *Device) SetCompute(w, src model.Buffer) bool {
	x, s := w.(Buffer), src.(Buffer)
	if x.dtype != F32 || s.dtype != F32 || x.n != s.n {
		panic(fmt.Sprintf("cuda: SetCompute of %d %s values from %d %s", s.n, s.dtype, x.n, x.dtype))
	}
	defer d.enter()()
	q, ok := d.copyOf(x.ptr, x.n)
	if !ok {
		return false
	}
	if x.n > 0 {
		d.launch(kToBF16, d.elementwiseGrid(x.n), grid1(256), 0, argPtr(q), argPtr(s.ptr), argInt64(x.n))
	}
	return true
}

// ComputeCopy returns the bf16 compute copy of registered weights w, or
// false. Download reads it as float32 (exactly). It satisfies
// model.ComputeCopier.
func (d *Device) ComputeCopy(w model.Buffer) (model.Buffer, bool) {
	b, ok := d.WeightsBF16(w)
	if !ok {
		return nil, false
	}
	return b, true
}

var _ model.ComputeCopier = (*Device)(nil)
