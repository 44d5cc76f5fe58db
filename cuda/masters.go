package cuda

import "github.com/r1go/r1go/model"

// Sharded master weights. Under ZeRO on a mixed-precision Device a rank
// updates the fp32 masters of its shard only, and every matmul and the
// embedding read the bf16 compute copy; so the masters outside the shard
// can be given back (ReleasePages) as long as the copy is written from the
// gathered fp32 values directly (Copy into the ComputeCopy view, which
// rounds them) and the tensors the Device reads in fp32 (norm weights,
// biases) stay. ComputeCopy also lets host code read the bf16 copy of
// weights whose masters are gone.

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
