package model

import "fmt"

// dims are the sizes the math needs, taken once from a Config.
type dims struct {
	L, C, V, I        int // layers, hidden, vocabulary, MLP width
	NH, KVH, HS       int // query heads, key-value heads, head size
	Q, KV, QKV        int // NH·HS, KVH·HS, Q+2·KV
	bias, tied        bool
	qkNorm            bool // Qwen3: RMSNorm over each head's q and k before RoPE
	lmHead, valueHead bool
	eps               float32
	theta             float64
}

// Head says what sits on top of the decoder.
type Head int

const (
	// LMHead: the policy, returning per-token logprob and entropy.
	LMHeadOutput Head = iota
	// ValueHead: a critic, returning one value per token (HF name "score").
	ValueHeadOutput
)

// layerParams are the views of one decoder layer into an arena. q, k and v
// projections are adjacent, as are gate and up, so each pair runs as one
// fused matmul; the HF tensors are sub-ranges of the fused views.
type layerParams struct {
	ln1  Buffer // [C]            input_layernorm.weight
	wqkv Buffer // [QKV, C]       q_proj | k_proj | v_proj weights
	bqkv Buffer // [QKV]          their biases (nil without bias)
	wo   Buffer // [C, Q]         o_proj.weight
	qn   Buffer // [HS]           q_norm.weight (nil without per-head q/k norm)
	kn   Buffer // [HS]           k_norm.weight
	ln2  Buffer // [C]            post_attention_layernorm.weight
	wgu  Buffer // [2I, C]        gate_proj | up_proj weights
	wd   Buffer // [C, I]         down_proj.weight
}

type params struct {
	wte    Buffer // [V, C] model.embed_tokens.weight
	layers []layerParams
	lnf    Buffer // [C]    model.norm.weight
	lmHead Buffer // [V, C] lm_head.weight, the same memory as wte when tied
	vw     Buffer // [C]    score.weight (critic)
	vb     Buffer // [1]    score.bias (critic)
}

// tensorSpec places one Hugging Face tensor in the arena.
type tensorSpec struct {
	Name  string
	Shape []int
	Off   int
}

func (s tensorSpec) size() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// layout lists every tensor of the model in arena order and the arena size.
func layout(d dims) ([]tensorSpec, int) {
	var specs []tensorSpec
	off := 0
	add := func(name string, shape ...int) {
		s := tensorSpec{Name: name, Shape: shape, Off: off}
		specs = append(specs, s)
		off += s.size()
	}
	add("model.embed_tokens.weight", d.V, d.C)
	for l := 0; l < d.L; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", d.C)
		add(p+"self_attn.q_proj.weight", d.Q, d.C)
		add(p+"self_attn.k_proj.weight", d.KV, d.C)
		add(p+"self_attn.v_proj.weight", d.KV, d.C)
		if d.bias {
			add(p+"self_attn.q_proj.bias", d.Q)
			add(p+"self_attn.k_proj.bias", d.KV)
			add(p+"self_attn.v_proj.bias", d.KV)
		}
		add(p+"self_attn.o_proj.weight", d.C, d.Q)
		if d.qkNorm {
			add(p+"self_attn.q_norm.weight", d.HS)
			add(p+"self_attn.k_norm.weight", d.HS)
		}
		add(p+"post_attention_layernorm.weight", d.C)
		add(p+"mlp.gate_proj.weight", d.I, d.C)
		add(p+"mlp.up_proj.weight", d.I, d.C)
		add(p+"mlp.down_proj.weight", d.C, d.I)
	}
	add("model.norm.weight", d.C)
	if d.lmHead && !d.tied {
		add("lm_head.weight", d.V, d.C)
	}
	if d.valueHead {
		add("score.weight", 1, d.C)
		add("score.bias", 1)
	}
	return specs, off
}

// views cuts an arena into named views following layout's order.
func views(d dims, specs []tensorSpec, arena Buffer) params {
	at := map[string]tensorSpec{}
	for _, s := range specs {
		at[s.Name] = s
	}
	span := func(first string, n int) Buffer { return arena.Slice(at[first].Off, n) }
	one := func(name string) Buffer { s := at[name]; return arena.Slice(s.Off, s.size()) }
	var p params
	p.wte = one("model.embed_tokens.weight")
	for l := 0; l < d.L; l++ {
		pre := fmt.Sprintf("model.layers.%d.", l)
		lp := layerParams{
			ln1:  one(pre + "input_layernorm.weight"),
			wqkv: span(pre+"self_attn.q_proj.weight", d.QKV*d.C),
			wo:   one(pre + "self_attn.o_proj.weight"),
			ln2:  one(pre + "post_attention_layernorm.weight"),
			wgu:  span(pre+"mlp.gate_proj.weight", 2*d.I*d.C),
			wd:   one(pre + "mlp.down_proj.weight"),
		}
		if d.bias {
			lp.bqkv = span(pre+"self_attn.q_proj.bias", d.QKV)
		}
		if d.qkNorm {
			lp.qn, lp.kn = one(pre+"self_attn.q_norm.weight"), one(pre+"self_attn.k_norm.weight")
		}
		p.layers = append(p.layers, lp)
	}
	p.lnf = one("model.norm.weight")
	if d.lmHead {
		if d.tied {
			p.lmHead = p.wte
		} else {
			p.lmHead = one("lm_head.weight")
		}
	}
	if d.valueHead {
		p.vw = one("score.weight")
		p.vb = one("score.bias")
	}
	return p
}
