package model

import "fmt"

// Gradient sharding (ZeRO-2) needs two things of the model and its device:
// to learn, during Backward, which gradients are final (GradsDone, called
// here), and to give back the memory of gradients already sent on, so that
// a rank holds its shard of the summed gradients and the buckets in flight
// rather than the whole fp32 arena (ReleaseGrads).

// gradsDone reports that the gradients [lo, n) are final, when asked to,
// and then that the backward goes on to write the run below lo: the layer
// under it, or the embedding table under layer 0 (gradsAhead).
func (m *Model) gradsDone(lo int) {
	if m.Grads == nil {
		return
	}
	if m.GradsDone != nil {
		m.GradsDone(lo)
	}
	if m.GradsNeed == nil || lo == 0 {
		return
	}
	for l := m.d.L; l >= 0; l-- {
		if m.layerOff(l) == lo {
			m.gradsAhead(l - 1)
			return
		}
	}
}

// gradsAhead tells GradsNeed which gradients the backward writes next:
// those of layer l, of the head (l = L: the final norm and the LM or
// value head above it, and a tied vocabulary table, which the LM head
// writes first), or of the embedding table (l = -1). Backward calls it
// for the head; gradsDone for the rest.
func (m *Model) gradsAhead(l int) {
	if m.GradsNeed == nil || m.Grads == nil {
		return
	}
	switch {
	case l >= m.d.L:
		m.GradsNeed(m.layerOff(m.d.L), m.Grads.Len())
		if m.d.tied && m.d.lmHead {
			m.GradsNeed(0, m.layerOff(0))
		}
	case l < 0:
		m.GradsNeed(0, m.layerOff(0))
	default:
		m.GradsNeed(m.layerOff(l), m.layerOff(l+1))
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

// ReleaseGrads zeroes b, gradients that have been sent on, and gives their
// memory back where the device can (Pager): the CPU device returns b's
// whole pages to the kernel (madvise MADV_DONTNEED), which maps zero pages
// on the next touch; CUDA's VMM arenas unmap their whole chunks, and
// MapGrads must map them again before they are written. Elsewhere it is
// dev.Zero.
func ReleaseGrads(dev Device, b Buffer) {
	if p, ok := dev.(Pager); ok {
		p.ReleasePages(b)
		return
	}
	dev.Zero(b)
}

// MapGrads readies gradients that ReleaseGrads gave back for writing: on a
// Pager it maps them again (zeroed); host pages need nothing.
func MapGrads(dev Device, b Buffer) {
	if p, ok := dev.(Pager); ok {
		p.MapPages(b)
	}
}

// GradsResident is how many bytes of b are backed by memory now (Pager:
// mincore's count on the CPU, the mapped chunks on CUDA); ok is false
// where the device cannot say.
func GradsResident(dev Device, b Buffer) (int64, bool) {
	if p, ok := dev.(Pager); ok {
		n, known, _ := p.Resident(b)
		return n, known
	}
	return 0, false
}

// ReadableWeights is w, or, where w's float32 values have been given back
// (ZeRO's sharded master weights on a Pager), its compute copy: what host
// code that only looks at the weights (a scan for non-finite values) can
// read instead.
func ReadableWeights(dev Device, w Buffer) Buffer {
	p, ok := dev.(Pager)
	if !ok {
		return w
	}
	if _, _, backed := p.Resident(w); backed {
		return w
	}
	if cc, ok := dev.(ComputeCopier); ok {
		if c, ok := cc.ComputeCopy(w); ok {
			return c
		}
	}
	return w
}
