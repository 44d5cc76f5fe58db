package plan

import "github.com/r1go/r1go/model"

// shape holds the sizes the arena formulas need, as the model package
// takes them from a config.
type shape struct {
	L, C, V, I, NH, KVH, HS, Q, KV, QKV int
	bias, tied, qkNorm                  bool
}

func shapeOf(cfg *model.Config) shape {
	sh := shape{L: cfg.NumHiddenLayers, C: cfg.HiddenSize, V: cfg.VocabSize, I: cfg.IntermediateSize,
		NH: cfg.NumAttentionHeads, KVH: cfg.NumKeyValueHeads, HS: cfg.HeadDim(),
		bias: cfg.QKVBias(), tied: cfg.TieWordEmbeddings, qkNorm: cfg.QKNorm()}
	sh.Q, sh.KV = sh.NH*sh.HS, sh.KVH*sh.HS
	sh.QKV = sh.Q + 2*sh.KV
	return sh
}

// arena is the number of scalars in a model's parameter arena: the
// checkpoint's tensors, lm_head sharing the embeddings when tied, a
// critic's score head instead of lm_head.
func (sh shape) arena(lmHead, valueHead bool) int64 {
	C, I := int64(sh.C), int64(sh.I)
	layer := C + int64(sh.QKV)*C + C*int64(sh.Q) + C + 2*I*C + C*I
	if sh.bias {
		layer += int64(sh.QKV)
	}
	if sh.qkNorm {
		layer += 2 * int64(sh.HS)
	}
	n := int64(sh.V)*C + int64(sh.L)*layer + C
	if lmHead && !sh.tied {
		n += int64(sh.V) * C
	}
	if valueHead {
		n += C + 1
	}
	return n
}

// acts is the number of scalars in the activation arena of a forward over
// T tokens: residuals of every layer, one layer's saved tensors (every
// layer's when saved), the head's outputs and the backward's scratch.
func (sh shape) acts(T int, saved bool) int64 {
	t, C, I := int64(T), int64(sh.C), int64(sh.I)
	QKV, Q := int64(sh.QKV), int64(sh.Q)
	layer := 3*t*C + 2*t + t*QKV + t*Q + int64(sh.NH)*t + 3*t*I
	scratch := 2*t*C + t*QKV + t*Q + 3*t*I + 3*t
	if sh.qkNorm {
		layer += t*QKV + t*int64(sh.NH+sh.KVH)
		scratch += 2 * t * QKV
	}
	nl := int64(1)
	if saved {
		nl = int64(sh.L)
	}
	return int64(sh.L+1)*t*C + nl*layer + 2*t*C + t + 4*t + scratch
}
