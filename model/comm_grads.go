package model

import "fmt"

// Gradient sharding (ZeRO-2) needs two things of the model and its device:
// to learn, during Backward, which gradients are final (GradsDone, called
// here), and to give back the memory of gradients already sent on, so that
// a rank holds its shard of the summed gradients and the buckets in flight
// rather than the whole fp32 arena (ReleaseGrads).

// gradsDone reports that the gradients [lo, n) are final, when asked to.
func (m *Model) gradsDone(lo int) {
	if m.GradsDone != nil && m.Grads != nil {
		m.GradsDone(lo)
	}
}

// layerOff is the arena offset of layer l's first tensor; layerOff(L) is
// that of the final norm, the first tensor after the layers.
func (m *Model) layerOff(l int) int {
	name := "model.norm.weight"
	if l < m.d.L {
		name = fmt.Sprintf("model.layers.%d.input_layernorm.weight", l)
	}
	for _, s := range m.specs {
		if s.Name == name {
			return s.Off
		}
	}
	panic("model: no tensor " + name)
}

// ReleaseGrads zeroes b, gradients that have been sent on, and where b is
// host memory of the CPU device gives its whole pages back to the kernel
// (madvise MADV_DONTNEED): they read as zeros and take no memory until the
// next Backward writes them. On another device it is dev.Zero; a device
// that could unmap its pages (CUDA's virtual memory calls) would do so here.
func ReleaseGrads(dev Device, b Buffer) {
	if x, ok := b.(cpuBuf[float32]); ok {
		releaseHost(x)
		return
	}
	dev.Zero(b)
}

// ResidentBytes is how many bytes of b, a CPU buffer, are backed by memory
// now (mincore), rounded to whole pages; ok is false for any other buffer
// or where the kernel cannot say.
func ResidentBytes(b Buffer) (n int64, ok bool) {
	x, ok := b.(cpuBuf[float32])
	if !ok {
		return 0, false
	}
	return residentHost(x)
}
