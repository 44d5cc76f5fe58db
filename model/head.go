package model

import (
	"fmt"
	"slices"
)

// The LM head, forward and backward. A batch with Scored positions runs it
// on those rows only: a loss reads the log-probabilities of the tokens the
// policy sampled, a fifth to a third of a packed RL batch of the embedded
// default (the prompt and the tool responses are the rest), and the head's
// products and its softmax over the vocabulary are a quarter of the tiny
// model's training compute and more of a 150K vocabulary's. The final norm's scored
// rows are gathered into a block of free scratch (Embedding is the one
// row gather every Device has), the head runs on the block, and its
// gradient is scattered back (EmbeddingBackward) before the final norm's
// backward. Each row's results do not depend on the rows beside it from
// MinGroupRows rows on, so the scored rows' log-probabilities are those of
// the whole batch's head; the weight gradient sums the same products
// without the zero rows, in another order.

// validScored checks that scored lists positions of [0, T) in increasing
// order.
func validScored(scored []int32, T int) error {
	for i, t := range scored {
		if t < 0 || int(t) >= T {
			return fmt.Errorf("model: scored position %d (entry %d) is outside the batch's %d tokens", t, i, T)
		}
		if i > 0 && t <= scored[i-1] {
			return fmt.Errorf("model: scored positions are not increasing at entry %d (%d after %d)", i, t, scored[i-1])
		}
	}
	return nil
}

// setScored records the batch's scored rows and their targets in a (nil:
// every row, in place).
func (a *activations) setScored(scored []int32) {
	a.scored, a.stargets = scored, a.stargets[:0]
	for _, t := range scored {
		a.stargets = append(a.stargets, a.targets[t])
	}
}

// headRows returns the entries [i0, i1) of a.scored that fall in rows
// [t0, t0+n).
func (a *activations) headRows(t0, n int) (i0, i1 int) {
	i0, _ = slices.BinarySearch(a.scored, int32(t0))
	i1, _ = slices.BinarySearch(a.scored, int32(t0+n))
	return i0, i1
}

// lmHead computes the head's log-probabilities, entropies and
// log-normalisers into a.logprob, a.entropy and a.lseV: row t at t, or,
// with scored rows, the k-th scored row at k.
func (m *Model) lmHead(a *activations) {
	d, dev := m.d, m.Dev
	if a.scored == nil {
		dev.LMHead(a.logprob, a.entropy, a.lseV, a.logits, a.lnf, m.p.lmHead, a.targets, a.T, d.C, d.V) // a.logits: kept, or nil
		return
	}
	run := func(i0, i1 int, block Buffer) {
		n := i1 - i0
		if n == 0 {
			return
		}
		h := block.Slice(0, n*d.C)
		dev.Embedding(h, a.scored[i0:i1], a.lnf, d.C)
		var logits Buffer
		if a.logits != nil {
			logits = a.logits.Slice(i0*d.V, n*d.V)
		}
		dev.LMHead(a.logprob.Slice(i0, n), a.entropy.Slice(i0, n), a.lseV.Slice(i0, n), logits, h, m.p.lmHead,
			a.stargets[i0:i1], n, d.C, d.V)
	}
	switch {
	case !a.grouped:
		run(0, len(a.scored), a.tmp) // the layers' branch output: free once they ran
	case a.dx.Len() >= len(a.scored)*d.C:
		run(0, len(a.scored), a.dx) // a training forward's residual gradient: free until the backward
	default:
		// A grouped scoring arena has no whole-batch scratch: the largest
		// group's takes the scored rows in blocks of its size, the last
		// block ending at the last row, over the one before it, rather than
		// running short (fewer than MinGroupRows rows round differently).
		big := a.spans[0]
		for _, g := range a.spans {
			if g.t1-g.t0 > big.t1-big.t0 {
				big = g
			}
		}
		block, rows, S := a.group(dev, d, big, false).tmp, big.t1-big.t0, len(a.scored)
		for i0 := 0; i0 < S; i0 += rows {
			i1 := min(i0+rows, S)
			run(max(0, i1-rows), i1, block)
		}
	}
}

// headOutput downloads the head's outputs into out, one value per token
// (0 at rows that were not scored).
func (m *Model) headOutput(a *activations, out *Output) {
	dev, T := m.Dev, a.T
	out.LogProb, out.Entropy = make([]float32, T), make([]float32, T)
	if a.scored == nil {
		dev.Download(out.LogProb, a.logprob)
		dev.Download(out.Entropy, a.entropy)
		return
	}
	n := len(a.scored)
	if n == 0 {
		return
	}
	lp, en := make([]float32, n), make([]float32, n)
	dev.Download(lp, a.logprob.Slice(0, n))
	dev.Download(en, a.entropy.Slice(0, n))
	for k, t := range a.scored {
		out.LogProb[t], out.Entropy[t] = lp[k], en[k]
	}
}

// uploadHeadGrads puts the per-token gradients of the head's outputs on
// the device, laid out as lmHead laid out the outputs; with scored rows, a
// gradient at a row that was not scored is an error (its output was never
// computed).
func (m *Model) uploadHeadGrads(a *activations, dLogProb, dEntropy []float32) error {
	dev := m.Dev
	if a.scored == nil {
		upload(dev, a.dlogprob, dLogProb)
		upload(dev, a.dentropy, dEntropy)
		return nil
	}
	n := len(a.scored)
	for _, g := range []struct {
		name string
		all  []float32
		dst  Buffer
	}{{"dLogProb", dLogProb, a.dlogprob}, {"dEntropy", dEntropy, a.dentropy}} {
		if n == 0 {
			continue
		}
		if g.all == nil {
			dev.Zero(g.dst.Slice(0, n))
			continue
		}
		rows, k := make([]float32, n), 0
		for t, v := range g.all {
			if k < n && int(a.scored[k]) == t {
				rows[k] = v
				k++
			} else if v != 0 {
				return fmt.Errorf("model: %s is %g at position %d, which the batch does not score", g.name, v, t)
			}
		}
		dev.Upload(g.dst.Slice(0, n), rows)
	}
	return nil
}

// upload copies src into dst, or zeroes dst when src is nil.
func upload(dev Device, dst Buffer, src []float32) {
	if src == nil {
		dev.Zero(dst)
	} else {
		dev.Upload(dst, src)
	}
}

// headBackward takes rows [t0, t0+n) of the per-token gradients in a (the
// whole batch's arena) back through the head and the final RMSNorm into
// s.dx (the arena of those rows: a itself, or a group's), using s.dln as
// scratch.
func (m *Model) headBackward(a, s *activations, t0, n int) {
	d, dev := m.d, m.Dev
	rows := func(b Buffer, w int) Buffer { return b.Slice(t0*w, n*w) }
	wg := m.g // nil views for a frozen base under adapters: no weight gradients
	lnf := rows(a.lnf, d.C)
	switch m.Head {
	case LMHeadOutput:
		if a.scored != nil {
			m.scoredHeadBackward(a, s, t0, n)
			break
		}
		var logits Buffer
		if a.logits != nil { // kept by the forward; a grouped arena keeps none
			logits = rows(a.logits, d.V)
			a.logits = nil // now gradients: another Backward of this forward computes the logits again
		}
		dev.LMHeadBackward(s.dln, wg.lmHead, rows(a.dlogprob, 1), rows(a.dentropy, 1), logits, lnf, m.p.lmHead,
			rows(a.lseV, 1), rows(a.entropy, 1), a.targets[t0:t0+n], n, d.C, d.V)
	case ValueHeadOutput:
		dv := rows(a.dvalues, 1)
		dev.Gemm(false, false, n, d.C, 1, 1, dv, 1, m.p.vw, d.C, 0, s.dln, d.C)
		dev.Gemm(true, false, 1, d.C, n, 1, dv, 1, lnf, d.C, 1, m.g.vw, d.C)
		dev.BiasBackward(m.g.vb, dv, 1, n, 1)
	}
	dev.RMSNormBackward(s.dx, s.dxc, wg.lnf, s.dln, s.x(d.L), m.p.lnf, rows(a.rstdf, 1), nil, n, d.C) // also dx's compute view
}

// scoredHeadBackward is the LM head's backward for the scored rows among
// [t0, t0+n): the final norm's rows are gathered again into s.tmp (free
// before the layers' backward), the head's input gradient lands in s.dx
// (which the final norm's backward writes next) and is scattered into
// s.dln, zero at the rows that were not scored.
func (m *Model) scoredHeadBackward(a, s *activations, t0, n int) {
	d, dev := m.d, m.Dev
	dev.Zero(s.dln.Slice(0, n*d.C))
	i0, i1 := a.headRows(t0, n)
	k := i1 - i0
	if k == 0 {
		return
	}
	h, dh := s.tmp.Slice(0, k*d.C), s.dx.Slice(0, k*d.C)
	dev.Embedding(h, a.scored[i0:i1], a.lnf, d.C)
	var logits Buffer
	if a.logits != nil {
		logits = a.logits.Slice(i0*d.V, k*d.V)
		if i1 == len(a.scored) {
			a.logits = nil // now gradients, as in headBackward
		}
	}
	dev.LMHeadBackward(dh, m.g.lmHead, a.dlogprob.Slice(i0, k), a.dentropy.Slice(i0, k), logits, h, m.p.lmHead,
		a.lseV.Slice(i0, k), a.entropy.Slice(i0, k), a.stargets[i0:i1], k, d.C, d.V)
	local := make([]int32, k)
	for j, t := range a.scored[i0:i1] {
		local[j] = t - int32(t0)
	}
	dev.EmbeddingBackward(s.dln, dh, local, d.C)
}
