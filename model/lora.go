package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// LoRA adapters (Hu et al. 2021) in PEFT's form: a target projection
// y = W x becomes y = W x + (alpha/r)·B A x, with A [r, in] and B [out, r]
// trained and W frozen. The adapters of every layer live in one arena
// (Params) with a gradient arena of the same layout (Grads), which the
// optimizer takes in place of the model's; the base model is frozen (no
// gradient arena) and may be stored as bf16.
//
// The adapter's product is recomputed in the backward (u = A x costs
// T·r·in), so adapters add no saved activations.
//
// Dropout (lora_dropout = p > 0) is PEFT's: W x + (alpha/r)·B A drop(x),
// drop(x) = x ⊙ mask / (1−p), in a training Forward only (scoring, decode
// and the reference see no dropout, as PEFT in eval mode). Each adapter of
// each training Forward draws its own mask from a hash of (Seed, the
// training forward's count, layer, module, element), so the backward's
// recomputation sees the same mask and a run is reproducible; see
// DropoutKeep. The mask is applied with the Device's own ops (a gather of
// the input with the dropped elements pointing at a zero), so every
// device runs it. The count restarts at 0 in a new process (a resumed run
// draws other masks than an uninterrupted one would), and data-parallel
// ranks with the same Seed draw the same masks for their own micro-batches.

// LoRAConfig is the actor.lora section: PEFT's LoraConfig fields.
type LoRAConfig struct {
	Rank          int      `yaml:"rank" help:"LoRA rank r (0: full fine-tuning)"`
	Alpha         float64  `yaml:"alpha" help:"LoRA alpha; the adapter output is scaled by alpha/rank"`
	Dropout       float64  `yaml:"dropout" help:"dropout probability on the adapter input, in training forwards only (PEFT's lora_dropout)"`
	TargetModules []string `yaml:"target_modules" help:"projections to adapt: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all-linear"`
}

// loraModules are the adaptable projections of a layer, in arena order.
var loraModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// Enabled says whether the config asks for adapters.
func (c LoRAConfig) Enabled() bool { return c.Rank > 0 }

// Validate checks the config and expands "all-linear".
func (c *LoRAConfig) Validate() error {
	if c.Rank < 0 {
		return fmt.Errorf("lora: rank %d must be ≥ 0", c.Rank)
	}
	if !c.Enabled() {
		return nil
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("lora: alpha %v must be a finite number > 0", c.Alpha)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return fmt.Errorf("lora: dropout %v must lie in [0, 1)", c.Dropout)
	}
	if len(c.TargetModules) == 0 {
		return fmt.Errorf("lora: target_modules is empty")
	}
	if slices.Equal(c.TargetModules, []string{"all-linear"}) {
		c.TargetModules = slices.Clone(loraModules)
	}
	seen := map[string]bool{}
	for _, t := range c.TargetModules {
		if !slices.Contains(loraModules, t) {
			return fmt.Errorf("lora: target module %q is not one of %v (or all-linear)", t, loraModules)
		}
		if seen[t] {
			return fmt.Errorf("lora: target module %q listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// loraAdapter is one projection's A and B views.
type loraAdapter struct {
	module  string
	layer   int
	in, out int
	a, b    Buffer // A [r, in], B [out, r]
	ga, gb  Buffer // their gradients
}

// LoRA is a set of adapters attached to a model.
type LoRA struct {
	Config LoRAConfig
	Scale  float32 // alpha / rank
	Params Buffer  // every A and B, layer by layer, module by module
	Grads  Buffer
	specs  []tensorSpec // PEFT names (without the base_model.model. prefix) in arena order
	layers [][]loraAdapter
	u, du  Buffer // [T, r] scratch: A x and its gradient

	// Seed keys the dropout masks (AttachLoRA's seed).
	Seed  uint64
	draws uint64  // training forwards so far: the current one's mask key
	src   Buffer  // [T·in + 1] dropout scratch: the input, then a zero
	dst   Buffer  // [T·in] the dropped input
	ids   []int32 // [T·in] gather indices: i where kept, T·in where dropped
}

// moduleDims are a projection's input and output widths.
func (d dims) moduleDims(module string) (in, out int) {
	switch module {
	case "q_proj":
		return d.C, d.Q
	case "k_proj", "v_proj":
		return d.C, d.KV
	case "o_proj":
		return d.Q, d.C
	case "gate_proj", "up_proj":
		return d.C, d.I
	}
	return d.I, d.C // down_proj
}

// AttachLoRA adds fresh adapters to a frozen model: A drawn as PEFT's
// default (Kaiming-uniform with a = √5: uniform ±1/√in), B zero, so the
// adapted model starts equal to the base. seed fixes A.
func (m *Model) AttachLoRA(cfg LoRAConfig, seed uint64) (*LoRA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, fmt.Errorf("lora: rank 0 attaches no adapters")
	}
	if !m.Frozen() {
		return nil, fmt.Errorf("lora: the base model must be frozen (load it with LoadOptions{Frozen: true})")
	}
	if m.Head != LMHeadOutput {
		return nil, fmt.Errorf("lora: adapters are for a policy (LM head) model")
	}
	if m.lora != nil {
		return nil, fmt.Errorf("lora: the model already has adapters")
	}
	d, r := m.d, cfg.Rank
	lo := &LoRA{Config: cfg, Scale: float32(cfg.Alpha / float64(r)), Seed: seed}
	off := 0
	for l := 0; l < d.L; l++ {
		for _, mod := range loraModules {
			if !slices.Contains(cfg.TargetModules, mod) {
				continue
			}
			in, out := d.moduleDims(mod)
			p := fmt.Sprintf("model.layers.%d.%s.%s.", l, loraBlock(mod), mod)
			lo.specs = append(lo.specs, tensorSpec{Name: p + "lora_A.weight", Shape: []int{r, in}, Off: off})
			off += r * in
			lo.specs = append(lo.specs, tensorSpec{Name: p + "lora_B.weight", Shape: []int{out, r}, Off: off})
			off += out * r
		}
	}
	lo.Params, lo.Grads = m.Dev.Alloc(off), m.Dev.Alloc(off)
	k := 0
	for l := 0; l < d.L; l++ {
		var ads []loraAdapter
		for _, mod := range loraModules {
			if !slices.Contains(cfg.TargetModules, mod) {
				continue
			}
			in, out := d.moduleDims(mod)
			sa, sb := lo.specs[k], lo.specs[k+1]
			k += 2
			ads = append(ads, loraAdapter{module: mod, layer: l, in: in, out: out,
				a: lo.Params.Slice(sa.Off, sa.size()), b: lo.Params.Slice(sb.Off, sb.size()),
				ga: lo.Grads.Slice(sa.Off, sa.size()), gb: lo.Grads.Slice(sb.Off, sb.size())})
		}
		lo.layers = append(lo.layers, ads)
	}
	// PEFT's reset_lora_parameters: kaiming_uniform_(A, a=√5), zeros(B).
	rng := rand.New(rand.NewPCG(seed, seed^0x10a))
	host := make([]float32, off)
	for _, s := range lo.specs {
		if !strings.HasSuffix(s.Name, "lora_A.weight") {
			continue
		}
		bound := 1 / math.Sqrt(float64(s.Shape[1]))
		for i := s.Off; i < s.Off+s.size(); i++ {
			host[i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	m.Dev.Upload(lo.Params, host)
	m.lora = lo
	return lo, nil
}

// loraBlock is the submodule a projection sits in.
func loraBlock(module string) string {
	if module == "gate_proj" || module == "up_proj" || module == "down_proj" {
		return "mlp"
	}
	return "self_attn"
}

// Adapters returns the model's adapters, or nil.
func (m *Model) Adapters() *LoRA { return m.lora }

// Base returns a model that shares this one's weights and config but runs
// without its adapters and with activations of its own: the reference
// policy of a LoRA run, with no second copy of the weights.
func (m *Model) Base() *Model {
	return &Model{Config: m.Config, Dev: m.Dev, Head: m.Head, Params: m.Params, specs: m.specs, d: m.d, p: m.p, products: m.products, tiles: m.tiles, tiled: m.tiled, viewsCut: m.viewsCut}
}

// Freeze drops the gradient arena: the weights stay, training them stops
// (the base of LoRA adapters). The arena's memory goes to the collector.
func (m *Model) Freeze() {
	if m.Grads != nil {
		m.Dev.Free(m.Grads)
	}
	m.Grads, m.g = nil, params{}
}

// Trainable returns the arenas an optimizer updates: the adapters' when
// the model has them, the model's own otherwise.
func (m *Model) Trainable() (params, grads Buffer) {
	if m.lora != nil {
		return m.lora.Params, m.lora.Grads
	}
	return m.Params, m.Grads
}

// Tensors lists the adapters' PEFT names (without the base_model.model.
// prefix) and shapes in arena order.
func (lo *LoRA) Tensors() []NamedShape {
	out := make([]NamedShape, len(lo.specs))
	for i, s := range lo.specs {
		out[i] = NamedShape{Name: s.Name, Shape: append([]int(nil), s.Shape...)}
	}
	return out
}

// ZeroGrads clears the adapters' gradients.
func (lo *LoRA) ZeroGrads(dev Device) { dev.Zero(lo.Grads) }

// ensureScratch sizes u and du for T tokens.
func (lo *LoRA) ensureScratch(dev Device, T int) {
	n := T * lo.Config.Rank
	if lo.u == nil || lo.u.Len() < n {
		lo.u, lo.du = dev.Alloc(n), dev.Alloc(n)
	}
}

// adapter finds layer l's adapter of module, or nil.
func (lo *LoRA) adapter(l int, module string) *loraAdapter {
	for i := range lo.layers[l] {
		if lo.layers[l][i].module == module {
			return &lo.layers[l][i]
		}
	}
	return nil
}

// adapterOrNil is adapter on a possibly nil set.
func (lo *LoRA) adapterOrNil(l int, module string) *loraAdapter {
	if lo == nil {
		return nil
	}
	return lo.adapter(l, module)
}

// forward adds scale·(drop(x) Aᵀ) Bᵀ to out[T, ldo] (its first ad.out
// columns from out's start), x being [T, ad.in]; drop applies dropout.
func (lo *LoRA) forward(dev Device, ad *loraAdapter, x Buffer, out Buffer, ldo, T, row0 int, drop bool) {
	r := lo.Config.Rank
	u := lo.u.Slice(0, T*r)
	xin, keep := lo.input(dev, ad, x, T, row0, drop)
	dev.Gemm(false, true, T, r, ad.in, keep, xin, ad.in, ad.a, ad.in, 0, u, r)
	dev.Gemm(false, true, T, ad.out, r, lo.Scale, u, r, ad.b, r, 1, out, ldo)
}

// backward takes dy[T, ldy] (the gradient of the adapted output, first
// ad.out columns), accumulates dA and dB, and adds the adapter's part of
// the input gradient to dx[T, ad.in]. drop must be what the forward used:
// the mask is drawn again, the same.
func (lo *LoRA) backward(dev Device, ad *loraAdapter, x, dy Buffer, ldy int, dx Buffer, T, row0 int, drop bool) {
	r := lo.Config.Rank
	u, du := lo.u.Slice(0, T*r), lo.du.Slice(0, T*r)
	xin, keep := lo.input(dev, ad, x, T, row0, drop)
	dev.Gemm(false, true, T, r, ad.in, keep, xin, ad.in, ad.a, ad.in, 0, u, r) // recompute u = drop(x) Aᵀ
	dev.Gemm(true, false, ad.out, r, T, lo.Scale, dy, ldy, u, r, 1, ad.gb, r)
	dev.Gemm(false, false, T, r, ad.out, lo.Scale, dy, ldy, ad.b, r, 0, du, r)
	dev.Gemm(true, false, r, ad.in, T, keep, du, r, xin, ad.in, 1, ad.ga, ad.in)
	if !drop {
		dev.Gemm(false, false, T, ad.in, r, 1, du, r, ad.a, ad.in, 1, dx, ad.in)
		return
	}
	// dx += mask ⊙ (du A)/(1−p): the product into src, gathered through
	// the same mask into dst.
	n := T * ad.in
	dev.Gemm(false, false, T, ad.in, r, keep, du, r, ad.a, ad.in, 0, lo.src, ad.in)
	dev.Zero(lo.src.Slice(n, 1))
	dev.Embedding(lo.dst.Slice(0, n), lo.ids[:n], lo.src.Slice(0, n+1), 1)
	dev.Add(dx.Slice(0, n), dx.Slice(0, n), lo.dst.Slice(0, n))
}

// input returns what A multiplies and its scale: x and 1 without dropout;
// x ⊙ mask (in lo.dst) and 1/(1−p) with it, the scale going into the Gemm.
// x holds rows row0.. of the batch (a group's): the mask elements are
// numbered within the whole batch's [T, in] input.
func (lo *LoRA) input(dev Device, ad *loraAdapter, x Buffer, T, row0 int, drop bool) (Buffer, float32) {
	if !drop {
		return x, 1
	}
	n := T * ad.in
	if lo.dst == nil || lo.dst.Len() < n {
		if lo.dst != nil {
			dev.Free(lo.src)
			dev.Free(lo.dst)
		}
		lo.src, lo.dst = dev.Alloc(n+1), dev.Alloc(n)
	}
	if cap(lo.ids) < n {
		lo.ids = make([]int32, n)
	}
	p := lo.Config.Dropout
	k := lo.maskKey(ad)
	ids := lo.ids[:n]
	for i := range ids {
		ids[i] = int32(i)
		if !DropoutKeep(k, row0*ad.in+i, p) {
			ids[i] = int32(n) // the zero after the input
		}
	}
	dev.Copy(lo.src.Slice(0, n), x.Slice(0, n))
	dev.Zero(lo.src.Slice(n, 1))
	dev.Embedding(lo.dst.Slice(0, n), ids, lo.src.Slice(0, n+1), 1)
	return lo.dst.Slice(0, n), float32(1 / (1 - p))
}

// beginForward starts a Forward: a training one with dropout draws new
// masks. It reports whether this Forward drops.
func (lo *LoRA) beginForward(train bool) bool {
	if lo == nil || !train || lo.Config.Dropout == 0 {
		return false
	}
	lo.draws++
	return true
}

// maskKey is the hash key of ad's mask in the current training forward.
func (lo *LoRA) maskKey(ad *loraAdapter) uint64 {
	return DropoutMaskKey(lo.Seed, lo.draws, ad.layer, slices.Index(loraModules, ad.module))
}

// DropoutMaskKey keys one adapter's dropout mask: seed, the 1-based count
// of training forwards, the layer and the module's index in q_proj, k_proj,
// v_proj, o_proj, gate_proj, up_proj, down_proj order:
// mix(mix(seed + draw·φ) + 16·layer + module), φ = 0x9E3779B97F4A7C15 and
// mix SplitMix64's finaliser (arithmetic mod 2⁶⁴).
func DropoutMaskKey(seed, draw uint64, layer, module int) uint64 {
	return splitmix(splitmix(seed+draw*0x9E3779B97F4A7C15) + uint64(16*layer+module))
}

// DropoutKeep says whether element i (row-major in the adapter's [T, in]
// input) survives dropout p under key: u = mix(key + i·φ) >> 11 as a
// fraction of 2⁵³ is kept when u ≥ p.
func DropoutKeep(key uint64, i int, p float64) bool {
	u := splitmix(key+uint64(i)*0x9E3779B97F4A7C15) >> 11
	return float64(u)*(1.0/(1<<53)) >= p
}

func splitmix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// colSlice is the part of a [T, ld] buffer that starts at column off.
func colSlice(b Buffer, off, ld, T, width int) Buffer {
	return b.Slice(off, (T-1)*ld+width)
}
