package model

import (
	"fmt"
)

// Model is a Qwen2-family (Qwen2, Qwen3, Llama) decoder on a Device: its parameters and gradients
// each live in one arena (Params, Grads) cut into per-layer views, and the
// activations of the last Forward in a third.
type Model struct {
	Config *Config
	Dev    Device
	Head   Head

	// Recompute keeps only each layer's residual input during a training
	// forward and recomputes the rest of the layer in the backward
	// (activation checkpointing): memory O(L·T·C) instead of O(L·T·(C+I)).
	// With Recompute off a training forward saves as many layers as fit
	// autoRecomputeBytes (the first ones; the rest share one set of views
	// and are recomputed): the same values, some computed twice, instead
	// of running out of memory (a 0.5B model saves 77 KB per token and
	// layer, 1.85 MB per token for all 24), and once every layer fits, the
	// LM head's logits too when they fit the rest (keeps).
	Recompute bool
	// SaveBytes replaces autoRecomputeBytes as that bound when positive:
	// the trainer raises it on a GPU whose memory plan has room for every
	// layer's activations (cmd/train/plan.go), and a caller that knows its
	// memory may (benchmarks/cpu's step), so that the backward runs fewer
	// layers' forwards again.
	SaveBytes int64

	Params Buffer // every parameter, in layout order
	Grads  Buffer // same layout as Params; accumulates over Backward calls; nil when frozen
	// GradsDone, when set, is called during Backward each time the
	// gradients [lo, Grads.Len()) are final for this Backward: lo
	// decreases, the last call has lo = 0. Data parallel (ZeRO-2) sends
	// those gradients on while the rest of the backward runs (comm_grads.go).
	GradsDone func(lo int)
	// GradsNeed, when set, is called during Backward before it writes the
	// gradients [lo, hi), a layer's or the head's, so that memory given
	// back after the last Backward (ZeRO-2 on CUDA's VMM arenas) is mapped
	// again in time (comm_grads.go).
	GradsNeed func(lo, hi int)
	// SaveFrom, when set, holds the whole parameter arena on the host and
	// Save writes it instead of reading Params: data parallel's sharded
	// master weights, gathered on rank 0 for a checkpoint (rl/dp/masters.go).
	SaveFrom []float32
	specs    []tensorSpec
	d        dims
	p, g     params

	lora     *LoRA        // adapters, or nil
	acts     *activations // of the last Forward
	stepActs *activations // of the last KV-cache Step
	batch    Batch        // the batch of the last Forward
	train    bool
	drop     bool // the last Forward applied LoRA dropout (a training one)

	sampleLogits Buffer       // StepSample's logits in host memory, reused
	spilled      bool         // Params is a file mapping (SpillWeights)
	products     bool         // a rollout copy: weights from BF16Products (LoadOptions.BF16Products)
	tiles        []tileMatrix // the product matrices in the device's product layout, each once (products.go)
	tiled        bool         // tiles is not empty: the arena is in the product layout
	viewsCut     bool         // setViews ran once: the product layout is chosen
}

// saveBound is the most float32 bytes of saved layer activations a
// training Forward keeps (SaveBytes, else autoRecomputeBytes).
func (m *Model) saveBound() int64 {
	if m.SaveBytes > 0 {
		return m.SaveBytes
	}
	return autoRecomputeBytes
}

// autoRecomputeBytes bounds the saved layer activations of one training
// forward (float32 bytes) before recomputation switches on by itself.
const autoRecomputeBytes = 1 << 30

// keep is what a training forward saves for its backward besides the
// residuals: its first layers' activations (the others share one set of
// views and are recomputed, except the last layer, whose activations the
// shared set still holds) and, once every layer is saved, the LM head's
// logits (on a device that can keep them), so that its backward does not
// compute them again.
type keep struct {
	layers int
	logits bool
}

// keeps is what a training forward of T tokens saves within the bound
// (SaveBytes or autoRecomputeBytes): all L layers when they fit, else k
// plus the shared set; then the logits when they fit what is left.
// Nothing for scoring and under Recompute.
func (m *Model) keeps(T int, train bool) keep {
	if !train || m.Recompute {
		return keep{}
	}
	per := int64(layerActSize(m.d, T)) * 4
	bound := m.saveBound()
	all := int64(m.d.L) * per
	if all > bound {
		return keep{layers: int(max(0, bound/per-1))}
	}
	can := Stores(m.Dev, StoreKeptLogits)
	return keep{layers: m.d.L, logits: can && m.Head == LMHeadOutput && all+int64(T)*int64(m.d.V)*4 <= bound}
}

// Batch is a packed batch of token sequences without padding.
type Batch struct {
	Tokens []int32 // [T] token ids of all sequences, one after another
	Seqs   []int32 // [n+1] start offset of each sequence; Seqs[n] = T
	// Scored, when not nil, lists in increasing order the positions whose
	// LogProb and Entropy the caller reads (a loss's): the LM head runs on
	// those rows only (head.go), Output holds 0 at the others, and Backward
	// takes gradients at these positions only. A value head ignores it.
	Scored []int32
}

// Output holds the per-token results of a Forward, on the host.
type Output struct {
	// LogProb[t] is log p(Tokens[t+1] | Tokens[..t]) within t's sequence;
	// 0 at the last token of each sequence, which has no next token.
	LogProb []float32
	Entropy []float32 // entropy of the next-token distribution at t
	Values  []float32 // the value head's output (critic models)
}

// New allocates a model for cfg on dev with zeroed parameters; load weights
// with LoadWeights or fill them with InitRandom.
func New(cfg *Config, dev Device, head Head) (*Model, error) {
	return NewWith(cfg, dev, head, LoadOptions{})
}

// NewWith is New with a storage choice: a frozen model has no gradient
// arena, and a frozen model may keep its weights in bfloat16.
func NewWith(cfg *Config, dev Device, head Head, opt LoadOptions) (*Model, error) {
	d, err := dimsOf(cfg, head)
	if err != nil {
		return nil, err
	}
	specs, n := layout(d)
	m := &Model{Config: cfg, Dev: dev, Head: head, d: d, specs: specs}
	switch opt.DType {
	case "", "float32":
		m.Params = dev.Alloc(n)
	case "bfloat16":
		if !Stores(dev, StoreBF16) {
			return nil, fmt.Errorf("model: device %s cannot store bfloat16 weights", dev.Name())
		}
		if !opt.Frozen {
			return nil, fmt.Errorf("model: bfloat16 weights are for frozen models; a trained model keeps float32 master weights")
		}
		var ok bool
		if _, bp := dev.(BF16Products); bp && opt.BF16Products {
			m.Params, ok = AllocAs(dev, n, StoreBF16Products)
			m.products = ok
		}
		if !ok {
			m.Params, _ = AllocAs(dev, n, StoreBF16)
		}
	default:
		return nil, fmt.Errorf("model: weight dtype %q is neither float32 nor bfloat16", opt.DType)
	}
	m.setViews()
	if !opt.Frozen {
		m.Grads = dev.Alloc(n)
		m.g = views(d, specs, m.Grads)
	}
	return m, nil
}

// Frozen says whether the model has no gradients (a reference policy).
func (m *Model) Frozen() bool { return m.Grads == nil }

// NumParams is the number of scalars in the parameter arena.
func (m *Model) NumParams() int { return m.Params.Len() }

// Tensors lists the model's Hugging Face tensor names and shapes in arena order.
func (m *Model) Tensors() []NamedShape {
	out := make([]NamedShape, len(m.specs))
	for i, s := range m.specs {
		out[i] = NamedShape{Name: s.Name, Shape: append([]int(nil), s.Shape...)}
	}
	return out
}

// ZeroGrads clears the gradient arena.
// With adapters attached it clears theirs too.
func (m *Model) ZeroGrads() {
	if m.Grads != nil {
		m.Dev.Zero(m.Grads)
	}
	if m.lora != nil {
		m.lora.ZeroGrads(m.Dev)
	}
}

// Validate checks a batch against the model: offsets that cover the tokens
// in order, and ids inside the vocabulary.
func (b Batch) Validate(vocab int) error {
	T := len(b.Tokens)
	if len(b.Seqs) < 2 || b.Seqs[0] != 0 || int(b.Seqs[len(b.Seqs)-1]) != T {
		return fmt.Errorf("model: batch sequence offsets %v do not cover its %d tokens", b.Seqs, T)
	}
	for i := 1; i < len(b.Seqs); i++ {
		if b.Seqs[i] <= b.Seqs[i-1] {
			return fmt.Errorf("model: batch sequence %d is empty or out of order (offsets %d, %d)", i-1, b.Seqs[i-1], b.Seqs[i])
		}
	}
	for t, id := range b.Tokens {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("model: token %d at position %d is outside the vocabulary [0, %d)", id, t, vocab)
		}
	}
	return validScored(b.Scored, T)
}

// positions and targets of a packed batch: position within the sequence,
// and the next token of the same sequence (−1 at a sequence's end).
func (b Batch) positions() (pos, targets []int32) {
	T := len(b.Tokens)
	pos, targets = make([]int32, T), make([]int32, T)
	for s := 0; s+1 < len(b.Seqs); s++ {
		lo, hi := int(b.Seqs[s]), int(b.Seqs[s+1])
		for t := lo; t < hi; t++ {
			pos[t] = int32(t - lo)
			targets[t] = -1
			if t+1 < hi {
				targets[t] = b.Tokens[t+1]
			}
		}
	}
	return pos, targets
}

// Forward runs the model over a packed batch. With train set it keeps what
// Backward needs (all activations, or only residuals under Recompute);
// without it, layers share one set of buffers, as scoring needs no backward.
func (m *Model) Forward(b Batch, train bool) (*Output, error) {
	a, err := m.forwardHidden(b, train)
	if err != nil {
		return nil, err
	}
	d, dev, T := m.d, m.Dev, a.T
	out := &Output{}
	switch m.Head {
	case LMHeadOutput:
		a.setScored(b.Scored)
		m.lmHead(a)
		m.headOutput(a, out)
	case ValueHeadOutput:
		dev.Gemm(false, true, T, 1, d.C, 1, a.lnf, d.C, m.p.vw, d.C, 0, a.values, 1)
		dev.AddBias(a.values, 1, m.p.vb, T, 1)
		out.Values = make([]float32, T)
		dev.Download(out.Values, a.values)
	}
	if a.grouped && !train {
		// A long scoring batch's arenas are not needed again: they go
		// now, not when this model next runs (a reference policy would
		// hold them through the whole update).
		err := dev.Sync()
		a.free(dev)
		m.acts = nil
		return out, err
	}
	return out, dev.Sync()
}

// forwardHidden runs the decoder up to the final RMSNorm (a.lnf). A long
// batch of a large model that does not save every layer runs in groups of
// sequences (groupTokens).
func (m *Model) forwardHidden(b Batch, train bool) (*activations, error) {
	if err := b.Validate(m.d.V); err != nil {
		return nil, err
	}
	d, dev, T := m.d, m.Dev, len(b.Tokens)
	save := m.keeps(T, train)
	maxT := 0
	if save.layers == 0 && len(b.Seqs) > 2 {
		maxT = groupTokens(d, T, train)
	}
	m.dropStepScratch() // decode scratch: rebuilt by the next Step
	m.batch, m.train = b, train
	m.drop = m.lora.beginForward(train)
	if maxT > 0 {
		spans := groupSpans(b.Seqs, maxT)
		a := cutGrouped(m.acts, dev, d, T, train, spans)
		m.acts = a
		a.pos, a.targets = b.positions()
		a.seqs, a.row0, a.spans = b.Seqs, 0, spans
		for _, g := range spans {
			ga := a.group(dev, d, g, train)
			n := g.t1 - g.t0
			dev.Embedding(ga.x(0), b.Tokens[g.t0:g.t1], m.p.wte, d.C)
			for l := 0; l < d.L; l++ {
				m.layerForward(ga, l, m.attend)
			}
			dev.RMSNorm(a.lnf.Slice(g.t0*d.C, n*d.C), nil, a.rstdf.Slice(g.t0, n), ga.x(d.L), nil, m.p.lnf, n, d.C, d.eps)
		}
		return a, nil
	}
	a := cutActivations(m.acts, dev, d, forwardCut(d, T, save, train))
	m.acts = a
	a.pos, a.targets = b.positions()
	a.seqs, a.row0 = b.Seqs, 0
	dev.Embedding(a.x(0), b.Tokens, m.p.wte, d.C)
	for l := 0; l < d.L; l++ {
		m.layerForward(a, l, m.attend)
	}
	dev.RMSNorm(a.lnf, nil, a.rstdf, a.x(d.L), nil, m.p.lnf, a.T, d.C, d.eps)
	return a, nil
}

// attend is the attention of a training or scoring forward: packed
// sequences, saving the log-normalisers for the backward.
func (m *Model) attend(a *activations, l int, s layerActs) {
	d := m.d
	m.Dev.Attention(s.att, s.lse, s.qkv, a.seqs, d.NH, d.KVH, d.HS)
}

// layerForward computes layer l from its residual input a.x(l) into
// a.x(l+1), saving what the backward reads in the layer's views; attend
// fills s.att from s.qkv (packed training attention, or the KV cache).
func (m *Model) layerForward(a *activations, l int, attend func(a *activations, l int, s layerActs)) {
	d, dev, w := m.d, m.Dev, m.p.layers[l]
	s := a.layer(l)
	if l >= a.nsaved {
		a.live = l // the shared set is now this layer's
	}
	T := a.T
	dev.RMSNorm(s.ln1, nil, s.rstd1, a.x(l), nil, w.ln1, T, d.C, d.eps)
	dev.Gemm(false, true, T, d.QKV, d.C, 1, s.ln1, d.C, w.wqkv, d.C, 0, s.qkv, d.QKV)
	lo := m.lora
	drop := m.drop && a != m.stepActs // never in a KV-cache Step
	if lo != nil {
		lo.ensureScratch(dev, T)
		for _, t := range []struct {
			mod string
			off int
		}{{"q_proj", 0}, {"k_proj", d.Q}, {"v_proj", d.Q + d.KV}} {
			if ad := lo.adapter(l, t.mod); ad != nil {
				lo.forward(dev, ad, s.ln1, colSlice(s.qkv, t.off, d.QKV, T, ad.out), d.QKV, T, a.row0, drop)
			}
		}
	}
	// A KV-cache step leaves bias and RoPE to AttentionCached, unless q/k
	// norms sit between the two (stepTheta).
	if a != m.stepActs || d.qkNorm {
		if w.bqkv != nil {
			dev.AddBias(s.qkv, d.QKV, w.bqkv, T, d.QKV)
		}
		if d.qkNorm {
			m.headNorm(a, s, w)
		}
		dev.RoPE(s.qkv, d.QKV, 0, a.pos, d.NH, d.HS, d.theta)
		dev.RoPE(s.qkv, d.QKV, d.Q, a.pos, d.KVH, d.HS, d.theta)
	}
	attend(a, l, s)
	dev.Gemm(false, true, T, d.C, d.Q, 1, s.att, d.Q, w.wo, d.Q, 0, a.tmp, d.C)
	if ad := lo.adapterOrNil(l, "o_proj"); ad != nil {
		lo.forward(dev, ad, s.att, a.tmp, d.C, T, a.row0, drop)
	}
	dev.RMSNorm(s.ln2, s.xmid, s.rstd2, a.x(l), a.tmp, w.ln2, T, d.C, d.eps) // xmid = x(l) + tmp, then its norm
	dev.Gemm(false, true, T, 2*d.I, d.C, 1, s.ln2, d.C, w.wgu, d.C, 0, s.gu, 2*d.I)
	for _, t := range []struct {
		mod string
		off int
	}{{"gate_proj", 0}, {"up_proj", d.I}} {
		if ad := lo.adapterOrNil(l, t.mod); ad != nil {
			lo.forward(dev, ad, s.ln2, colSlice(s.gu, t.off, 2*d.I, T, ad.out), 2*d.I, T, a.row0, drop)
		}
	}
	if bp, ok := dev.(BF16Products); ok && m.bf16Products() {
		bp.SwiGLU32(s.act, s.gu, T, d.I) // a rollout copy: float32 arithmetic
	} else {
		dev.SwiGLU(s.act, s.gu, T, d.I)
	}
	dev.Gemm(false, true, T, d.C, d.I, 1, s.act, d.I, w.wd, d.I, 0, a.tmp, d.C)
	if ad := lo.adapterOrNil(l, "down_proj"); ad != nil {
		lo.forward(dev, ad, s.act, a.tmp, d.C, T, a.row0, drop)
	}
	dev.Add(a.x(l+1), s.xmid, a.tmp)
}

// headNorm is Qwen3's RMSNorm over each head's query and key (weights
// q_norm and k_norm, [HS], shared by the heads) before RoPE. It reuses the
// Device's RMSNorm with rows = tokens × heads: the raw q|k|v rows are
// gathered into the blocked order (saved in s.qkraw for the backward), the
// q block and the k block are normalised, v is copied, and the result is
// gathered back into s.qkv's interleaved layout.
func (m *Model) headNorm(a *activations, s layerActs, w layerParams) {
	d, dev, T := m.d, m.Dev, a.T
	tq, tk := T*d.Q, T*d.KV
	dev.Embedding(s.qkraw, a.toBlocked, s.qkv, d.HS)
	dev.RMSNorm(a.qkn.Slice(0, tq), nil, s.rstdq, s.qkraw.Slice(0, tq), nil, w.qn, T*d.NH, d.HS, d.eps)
	dev.RMSNorm(a.qkn.Slice(tq, tk), nil, s.rstdk, s.qkraw.Slice(tq, tk), nil, w.kn, T*d.KVH, d.HS, d.eps)
	dev.Copy(a.qkn.Slice(tq+tk, tk), s.qkraw.Slice(tq+tk, tk))
	dev.Embedding(s.qkv, a.toInter, a.qkn, d.HS)
}

// headNormBackward turns a.dqkv, the gradient of the normalised q|k|v, into
// the gradient of the raw projections, accumulating into q_norm and k_norm.
func (m *Model) headNormBackward(a *activations, s layerActs, w, g layerParams) {
	d, dev, T := m.d, m.Dev, a.T
	tq, tk := T*d.Q, T*d.KV
	dn, draw := a.qkn, a.qkn2
	dev.Embedding(dn, a.toBlocked, a.dqkv, d.HS)
	dev.RMSNormBackward(draw.Slice(0, tq), nil, g.qn, dn.Slice(0, tq), s.qkraw.Slice(0, tq), w.qn, s.rstdq, nil, T*d.NH, d.HS)
	dev.RMSNormBackward(draw.Slice(tq, tk), nil, g.kn, dn.Slice(tq, tk), s.qkraw.Slice(tq, tk), w.kn, s.rstdk, nil, T*d.KVH, d.HS)
	dev.Copy(draw.Slice(tq+tk, tk), dn.Slice(tq+tk, tk))
	dev.Embedding(a.dqkv, a.toInter, draw, d.HS)
}

// dropStepScratch frees the decode arena (a device buffer must be freed,
// not just dropped).
func (m *Model) dropStepScratch() {
	if m.stepActs != nil {
		m.stepActs.free(m.Dev)
	}
	m.stepActs = nil
}
