package model

import "fmt"

// The backward pass of Model: the head, then the layers in reverse (or each
// group of sequences in turn), accumulating parameter gradients.

// Backward propagates per-token gradients of the last training Forward's
// outputs (d/dlogprob and d/dentropy for a policy, d/dvalue for a critic;
// nil means zero) to every parameter, accumulating into Grads.
func (m *Model) Backward(dLogProb, dEntropy, dValues []float32) error {
	a, d, dev := m.acts, m.d, m.Dev
	if m.Grads == nil && m.lora == nil {
		return fmt.Errorf("model: Backward on a frozen model")
	}
	if a == nil || !m.train {
		return fmt.Errorf("model: Backward without a training Forward")
	}
	T := a.T
	for name, g := range map[string][]float32{"dLogProb": dLogProb, "dEntropy": dEntropy, "dValues": dValues} {
		if g != nil && len(g) != T {
			return fmt.Errorf("model: %s has %d values for %d tokens", name, len(g), T)
		}
	}
	switch m.Head {
	case LMHeadOutput:
		if err := m.uploadHeadGrads(a, dLogProb, dEntropy); err != nil {
			return err
		}
	case ValueHeadOutput:
		upload(dev, a.dvalues, dValues)
	}
	if a.grouped {
		return m.backwardGrouped(a)
	}
	m.gradsAhead(d.L)
	m.headBackward(a, a, 0, T)
	m.gradsDone(m.layerOff(d.L))
	for l := d.L - 1; l >= 0; l-- {
		if !a.holds(l) {
			m.layerForward(a, l, m.attend) // recompute the layer's activations from its residual input
		}
		m.layerBackward(a, l)
		m.gradsDone(m.layerOff(l))
	}
	if m.Grads != nil {
		dev.EmbeddingBackward(m.g.wte, a.dx, m.batch.Tokens, d.C)
	}
	m.gradsDone(0)
	return dev.Sync()
}

// backwardGrouped is Backward over a grouped arena: the head group by
// group, then each layer group by group (recomputing the group's layer
// activations from its saved residual input), so that one group's scratch
// exists at a time. Weight gradients accumulate over the groups.
func (m *Model) backwardGrouped(a *activations) error {
	d, dev := m.d, m.Dev
	m.gradsAhead(d.L)
	for _, g := range a.spans {
		ga := a.group(dev, d, g, true)
		m.headBackward(a, ga, g.t0, g.t1-g.t0)
	}
	m.gradsDone(m.layerOff(d.L))
	for l := d.L - 1; l >= 0; l-- {
		for _, g := range a.spans {
			ga := a.group(dev, d, g, true)
			m.layerForward(ga, l, m.attend)
			m.layerBackward(ga, l)
		}
		m.gradsDone(m.layerOff(l)) // final once every group has passed the layer
	}
	if m.Grads != nil {
		dev.EmbeddingBackward(m.g.wte, a.dx, m.batch.Tokens, d.C)
	}
	m.gradsDone(0)
	return dev.Sync()
}

// layerBackward is layerForward read in reverse. a.dx holds the gradient of
// the layer's output residual on entry and of its input residual on exit.
func (m *Model) layerBackward(a *activations, l int) {
	d, dev, w := m.d, m.Dev, m.p.layers[l]
	var g layerParams // nil views for a frozen base under adapters
	if m.Grads != nil {
		g = m.g.layers[l]
	}
	lo := m.lora
	s := a.layer(l)
	T := a.T
	// The matmuls read the gradients as the arena holds them for them: in
	// compute storage, rounded once, under MixedPrecision (dxc, dgu,
	// dqkvc), else the float32 gradients themselves.
	dx, dqkv := a.dx, a.dqkv
	if a.dxc != nil {
		dx, dqkv = a.dxc, a.dqkvc
	}
	// MLP branch: x(l+1) = xmid + down(swiglu(gate_up(rmsnorm(xmid)))).
	dev.Gemm(false, false, T, d.I, d.C, 1, dx, d.C, w.wd, d.I, 0, a.dact, d.I)
	if g.wd != nil {
		dev.Gemm(true, false, d.C, d.I, T, 1, dx, d.C, s.act, d.I, 1, g.wd, d.I)
	}
	if ad := lo.adapterOrNil(l, "down_proj"); ad != nil {
		lo.backward(dev, ad, s.act, dx, d.C, a.dact, T, a.row0, m.drop)
	}
	dev.SwiGLUBackward(a.dgu, a.dact, s.gu, T, d.I)
	dev.Gemm(false, false, T, d.C, 2*d.I, 1, a.dgu, 2*d.I, w.wgu, d.C, 0, a.dln, d.C)
	if g.wgu != nil {
		dev.Gemm(true, false, 2*d.I, d.C, T, 1, a.dgu, 2*d.I, s.ln2, d.C, 1, g.wgu, d.C)
	}
	for _, t := range []struct {
		mod string
		off int
	}{{"gate_proj", 0}, {"up_proj", d.I}} {
		if ad := lo.adapterOrNil(l, t.mod); ad != nil {
			lo.backward(dev, ad, s.ln2, colSlice(a.dgu, t.off, 2*d.I, T, ad.out), 2*d.I, a.dln, T, a.row0, m.drop)
		}
	}
	m.normBackwardAdd(a, g.ln2, s.xmid, w.ln2, s.rstd2)
	// Attention branch: xmid = x(l) + o_proj(attention(rope(qkv(rmsnorm(x(l)))))).
	dev.Gemm(false, false, T, d.Q, d.C, 1, dx, d.C, w.wo, d.Q, 0, a.datt, d.Q)
	if g.wo != nil {
		dev.Gemm(true, false, d.C, d.Q, T, 1, dx, d.C, s.att, d.Q, 1, g.wo, d.Q)
	}
	if ad := lo.adapterOrNil(l, "o_proj"); ad != nil {
		lo.backward(dev, ad, s.att, dx, d.C, a.datt, T, a.row0, m.drop)
	}
	dev.AttentionBackward(a.dqkv, a.datt, s.att, s.lse, s.qkv, a.seqs, d.NH, d.KVH, d.HS)
	back := a.backPos()
	dev.RoPE(a.dqkv, d.QKV, 0, back, d.NH, d.HS, d.theta) // RoPE's backward: the turn back
	dev.RoPE(a.dqkv, d.QKV, d.Q, back, d.KVH, d.HS, d.theta)
	if d.qkNorm {
		m.headNormBackward(a, s, w, g)
	}
	if g.bqkv != nil {
		dev.BiasBackward(g.bqkv, a.dqkv, d.QKV, T, d.QKV)
	}
	if a.dqkvc != nil {
		dev.Copy(a.dqkvc, a.dqkv) // rounded once for the matmuls below
	}
	dev.Gemm(false, false, T, d.C, d.QKV, 1, dqkv, d.QKV, w.wqkv, d.C, 0, a.dln, d.C)
	if g.wqkv != nil {
		dev.Gemm(true, false, d.QKV, d.C, T, 1, dqkv, d.QKV, s.ln1, d.C, 1, g.wqkv, d.C)
	}
	for _, t := range []struct {
		mod string
		off int
	}{{"q_proj", 0}, {"k_proj", d.Q}, {"v_proj", d.Q + d.KV}} {
		if ad := lo.adapterOrNil(l, t.mod); ad != nil {
			lo.backward(dev, ad, s.ln1, colSlice(dqkv, t.off, d.QKV, T, ad.out), d.QKV, a.dln, T, a.row0, m.drop)
		}
	}
	m.normBackwardAdd(a, g.ln1, a.x(l), w.ln1, s.rstd1)
}

// backPos is a.pos negated: RoPE at those positions turns each row back,
// the rotation's transpose (its backward).
func (a *activations) backPos() []int32 {
	a.npos = a.npos[:0]
	for _, p := range a.pos {
		a.npos = append(a.npos, -p)
	}
	return a.npos
}

// normBackwardAdd adds the input gradient of a layer's RMSNorm (weight w,
// input inp; its output's gradient in a.dln) to the residual gradient
// a.dx, accumulating dw, and writes a.dx's compute view a.dxc when there
// is one.
func (m *Model) normBackwardAdd(a *activations, dw, inp, w, rstd Buffer) {
	m.Dev.RMSNormBackward(a.dx, a.dxc, dw, a.dln, inp, w, rstd, a.dx, a.T, m.d.C)
}
