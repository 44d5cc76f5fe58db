package plan

import (
	"slices"

	"github.com/r1go/r1go/model"
)

// shape holds the sizes the arena formulas need, as the model package
// takes them from a config.
type shape struct {
	L, C, V, I, NH, KVH, HS, Q, KV, QKV int
	bias, tied, qkNorm                  bool
	cfg                                 *model.Config // for the model's own layout functions
}

func shapeOf(cfg *model.Config) shape {
	sh := shape{L: cfg.NumHiddenLayers, C: cfg.HiddenSize, V: cfg.VocabSize, I: cfg.IntermediateSize,
		NH: cfg.NumAttentionHeads, KVH: cfg.NumKeyValueHeads, HS: cfg.HeadDim(),
		bias: cfg.QKVBias(), tied: cfg.TieWordEmbeddings, qkNorm: cfg.QKNorm(), cfg: cfg}
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

// layerActs is the number of scalars one layer saves for its backward.
func (sh shape) layerActs(T int) int64 {
	t, C, I := int64(T), int64(sh.C), int64(sh.I)
	n := 3*t*C + 2*t + t*int64(sh.QKV) + t*int64(sh.Q) + int64(sh.NH)*t + 3*t*I
	if sh.qkNorm {
		n += t*int64(sh.QKV) + t*int64(sh.NH+sh.KVH)
	}
	return n
}

// autoRecomputeBytes mirrors the model package's bound: a training forward
// whose saved layers would take more float32 bytes than this recomputes
// even when recomputation is off.
const autoRecomputeBytes = 1 << 30

// savedLayers mirrors model.Model's keeps: how many layers a
// training forward of T tokens saves (bound: model.Model.SaveBytes, or
// autoRecomputeBytes when 0): all L when they fit, else k plus one set of
// views shared by the rest within the bound; 0 under recomputation.
func (sh shape) savedLayers(T int, recompute bool, bound int64) int {
	if bound <= 0 {
		bound = autoRecomputeBytes
	}
	per := sh.layerActs(T) * 4
	switch {
	case recompute:
		return 0
	case int64(sh.L)*per <= bound:
		return sh.L
	}
	return int(max(0, bound/per-1))
}

// saves says whether a training forward of T tokens keeps every layer's
// activations.
func (sh shape) saves(T int, recompute bool, bound int64) bool {
	return sh.savedLayers(T, recompute, bound) == sh.L
}

// savedLayerBytes is the float32 count of a training forward's saved
// layers times 4: what model.Model.SaveBytes is compared with.
func (sh shape) savedLayerBytes(T int) int64 { return int64(sh.L) * sh.layerActs(T) * 4 }

// loraParams is the number of scalars of rank-r adapters on the named
// projections (nil or "all-linear": all seven) of every layer: A [r, in]
// and B [out, r] each.
func (sh shape) loraParams(r int, targets []string) int64 {
	all := len(targets) == 0
	var per int64
	for _, m := range []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} {
		if !all && !slices.Contains(targets, m) && !slices.Contains(targets, "all-linear") {
			continue
		}
		var in, out int
		switch m {
		case "q_proj":
			in, out = sh.C, sh.Q
		case "k_proj", "v_proj":
			in, out = sh.C, sh.KV
		case "o_proj":
			in, out = sh.Q, sh.C
		case "gate_proj", "up_proj":
			in, out = sh.C, sh.I
		default:
			in, out = sh.I, sh.C
		}
		per += int64(r) * int64(in+out)
	}
	return int64(sh.L) * per
}
