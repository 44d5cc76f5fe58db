package model

import (
	"fmt"
)

// KVCache holds the keys and values of every layer for a fixed number of
// sequence slots, each up to MaxLen positions: K[l] and V[l] are
// [Slots, MaxLen, KVH·HS]. Lens[s] is how many positions slot s holds.
type KVCache struct {
	Slots, MaxLen int
	K, V          []Buffer // [L] per layer
	Lens          []int32  // [Slots]
	kvw           int
	arena         Buffer // where K and V are slices of one buffer, that buffer
}

// NewKVCache allocates a cache of slots sequences of up to maxLen tokens,
// in the device's compute storage where it has one (StoreCompute), and
// in bf16 for a model with bf16 products on the CPU (a rollout copy: see
// model/cpu's attn_bf16.go).
func (m *Model) NewKVCache(slots, maxLen int) *KVCache {
	c := &KVCache{Slots: slots, MaxLen: maxLen, Lens: make([]int32, slots), kvw: m.d.KV}
	per := slots * maxLen * m.d.KV
	if m.bf16Products() && !kvCacheF32 {
		// Every layer's keys and values in one bf16 buffer (on the CPU in
		// huge pages where it is large enough and asked to).
		if arena, ok := AllocAs(m.Dev, 2*m.d.L*per, StoreKVArena); ok {
			c.arena = arena
			for l := 0; l < m.d.L; l++ {
				c.K = append(c.K, c.arena.Slice(2*l*per, per))
				c.V = append(c.V, c.arena.Slice((2*l+1)*per, per))
			}
			return c
		}
	}
	alloc := m.Dev.Alloc
	if Stores(m.Dev, StoreCompute) { // bf16 under mixed precision
		alloc = func(n int) Buffer { b, _ := AllocAs(m.Dev, n, StoreCompute); return b }
	}
	for l := 0; l < m.d.L; l++ {
		c.K = append(c.K, alloc(per))
		c.V = append(c.V, alloc(per))
	}
	return c
}

// kvCacheF32 keeps a rollout copy's KV cache in float32: the tests'
// reference for what the bf16 cache changes.
var kvCacheF32 bool

// bf16Products says whether m was made with LoadOptions.BF16Products on a
// device with BF16Products: a rollout copy.
func (m *Model) bf16Products() bool { return m.products }

// Free releases the cache's device memory.
func (c *KVCache) Free(dev Device) {
	if c.arena != nil {
		dev.Free(c.arena)
		c.arena, c.K, c.V = nil, nil, nil
		return
	}
	for l := range c.K {
		dev.Free(c.K[l])
		dev.Free(c.V[l])
	}
	c.K, c.V = nil, nil
}

// CopySlot makes slot dst a copy of slot src: n samples of one prompt
// share its prefill by copying its keys and values instead of recomputing.
func (c *KVCache) CopySlot(dev Device, dst, src int) {
	n := int(c.Lens[src]) * c.kvw
	for l := range c.K {
		dev.Copy(c.K[l].Slice(dst*c.MaxLen*c.kvw, n), c.K[l].Slice(src*c.MaxLen*c.kvw, n))
		dev.Copy(c.V[l].Slice(dst*c.MaxLen*c.kvw, n), c.V[l].Slice(src*c.MaxLen*c.kvw, n))
	}
	c.Lens[dst] = c.Lens[src]
}

// Chunk is a run of tokens that continues one cache slot: a whole prompt
// for a prefill, a single token for a decode step, or an observation.
type Chunk struct {
	Slot   int
	Tokens []int32
}

// Step runs chunks through the model against the cache, appending their
// keys and values to their slots, and returns the logits of each chunk's
// last token, [len(chunks)][V] flattened row-major.
func (m *Model) Step(c *KVCache, chunks []Chunk) ([]float32, error) {
	logits, err := m.stepLogits(c, chunks)
	if err != nil {
		return nil, err
	}
	defer m.Dev.Free(logits)
	out := make([]float32, logits.Len())
	m.Dev.Download(out, logits)
	return out, m.Dev.Sync()
}

// stepLogits is Step leaving the logits on the device, in a buffer the
// caller frees (decode.go samples from it there).
func (m *Model) stepLogits(c *KVCache, chunks []Chunk) (Buffer, error) {
	if m.Head != LMHeadOutput {
		return nil, fmt.Errorf("model: Step needs a language-model head")
	}
	logits := m.Dev.Alloc(len(chunks) * m.d.V)
	if err := m.stepInto(c, chunks, logits, nil); err != nil {
		m.Dev.Free(logits)
		return nil, err
	}
	return logits, nil
}

// stepInto is Step writing the logits into logits[len(chunks)][V]. run,
// when not nil, runs the step's device work (a StepGrapher's GraphStep,
// with a key naming the buffers it uses); the cache lengths advance after it.
func (m *Model) stepInto(c *KVCache, chunks []Chunk, logits Buffer, run func(key string, work func()) error) error {
	d, dev := m.d, m.Dev
	if m.Head != LMHeadOutput {
		return fmt.Errorf("model: Step needs a language-model head")
	}
	var tokens []int32
	slots, pos0, lens := make([]int32, len(chunks)), make([]int32, len(chunks)), make([]int32, len(chunks))
	last := make([]int32, len(chunks))
	seen := map[int]bool{}
	for j, ch := range chunks {
		if ch.Slot < 0 || ch.Slot >= c.Slots || seen[ch.Slot] {
			return fmt.Errorf("model: chunk %d names slot %d (cache has %d slots, each usable once per step)", j, ch.Slot, c.Slots)
		}
		seen[ch.Slot] = true
		if len(ch.Tokens) == 0 {
			return fmt.Errorf("model: chunk %d for slot %d is empty", j, ch.Slot)
		}
		if int(c.Lens[ch.Slot])+len(ch.Tokens) > c.MaxLen {
			return fmt.Errorf("model: slot %d would hold %d tokens, past the cache length %d", ch.Slot, int(c.Lens[ch.Slot])+len(ch.Tokens), c.MaxLen)
		}
		slots[j], pos0[j], lens[j] = int32(ch.Slot), c.Lens[ch.Slot], int32(len(ch.Tokens))
		tokens = append(tokens, ch.Tokens...)
		last[j] = int32(len(tokens) - 1)
	}
	b := Batch{Tokens: tokens, Seqs: []int32{0, int32(len(tokens))}}
	if err := b.Validate(d.V); err != nil {
		return err
	}
	T := len(tokens)
	a := cutActivations(m.stepActs, dev, d, forwardCut(d, T, keep{}, false))
	m.stepActs = a
	if !m.train && m.acts != nil {
		m.acts.free(dev) // decoding: a scoring arena is not needed again before the next Forward
		m.acts = nil
	}
	a.pos = make([]int32, 0, T)
	for j := range chunks {
		for i := int32(0); i < lens[j]; i++ {
			a.pos = append(a.pos, pos0[j]+i)
		}
	}
	work := func() {
		dev.Embedding(a.x(0), tokens, m.p.wte, d.C)
		for l := 0; l < d.L; l++ {
			m.layerForward(a, l, func(a *activations, l int, s layerActs) {
				bias, theta := m.stepTheta(l)
				dev.AttentionCached(s.att, s.qkv, bias, c.K[l], c.V[l], slots, pos0, lens, c.MaxLen, d.NH, d.KVH, d.HS, theta)
			})
		}
		dev.RMSNorm(a.lnf, nil, a.rstdf, a.x(d.L), nil, m.p.lnf, T, d.C, d.eps)
		m.logitRows(logits, a.lnf, a.tmp, last)
	}
	if run == nil {
		work()
	} else if err := run(fmt.Sprintf("step T=%d weights=%v acts=%v %v logits=%v cache=%v %v", T, m.Params, a.arena, a.resid, logits, c.K[0], c.V[len(c.V)-1]), work); err != nil {
		return err
	}
	for j := range chunks {
		c.Lens[slots[j]] += lens[j]
	}
	return nil
}

// stepTheta is the bias and rope theta that a step's AttentionCached of
// layer l applies before it attends: the layer's q|k|v bias and the
// model's theta, or nothing (nil, 0) for a model with q/k norms, which sit
// between the two, so layerForward runs them as separate ops.
func (m *Model) stepTheta(l int) (bias Buffer, theta float64) {
	if m.d.qkNorm {
		return nil, 0
	}
	return m.p.layers[l].bqkv, m.d.theta
}

// logitRows writes the logits [len(rows), V] of the chosen rows of h, the
// final norm's output: the rows are gathered into g (Embedding, with h as
// the table; g holds at least len(rows)·C values), then one product with
// the LM head.
func (m *Model) logitRows(logits, h, g Buffer, rows []int32) {
	d, dev := m.d, m.Dev
	g = g.Slice(0, len(rows)*d.C)
	dev.Embedding(g, rows, h, d.C)
	dev.Gemm(false, true, len(rows), d.V, d.C, 1, g, d.C, m.p.lmHead, d.C, 0, logits, d.V)
}

// FullLogits runs a scoring forward and returns the logits of the chosen
// token positions, [len(rows)][V] (sampling and tests).
func (m *Model) FullLogits(b Batch, rows []int32) ([]float32, error) {
	if _, err := m.forwardHidden(b, false); err != nil {
		return nil, err
	}
	d, dev := m.d, m.Dev
	for _, r := range rows {
		if r < 0 || int(r) >= len(b.Tokens) {
			return nil, fmt.Errorf("model: row %d outside the batch of %d tokens", r, len(b.Tokens))
		}
	}
	logits := dev.Alloc(len(rows) * d.V)
	defer dev.Free(logits)
	g := m.acts.tmp // free after the forward; a grouped arena has none
	if g == nil || g.Len() < len(rows)*d.C {
		g = dev.Alloc(len(rows) * d.C)
		defer dev.Free(g)
	}
	m.logitRows(logits, m.acts.lnf, g, rows)
	out := make([]float32, len(rows)*d.V)
	dev.Download(out, logits)
	return out, dev.Sync()
}
