package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"

	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model/safetensors"
)

// dimsOf checks that cfg describes a model this package computes exactly
// and takes the sizes the math needs from it.
func dimsOf(cfg *Config, head Head) (dims, error) {
	if err := cfg.Validate(); err != nil {
		return dims{}, err
	}
	d := dims{
		L: cfg.NumHiddenLayers, C: cfg.HiddenSize, V: cfg.VocabSize, I: cfg.IntermediateSize,
		NH: cfg.NumAttentionHeads, KVH: cfg.NumKeyValueHeads, HS: cfg.HeadDim(),
		bias: cfg.QKVBias(), tied: cfg.TieWordEmbeddings, qkNorm: cfg.QKNorm(),
		lmHead: head == LMHeadOutput, valueHead: head == ValueHeadOutput,
		eps: float32(cfg.RMSNormEps), theta: cfg.RopeTheta,
	}
	d.Q, d.KV = d.NH*d.HS, d.KVH*d.HS
	d.QKV = d.Q + 2*d.KV
	if cfg.ModelType == "llama" && cfg.AttentionBias {
		return dims{}, fmt.Errorf("model: %s: attention_bias with model_type llama (an o_proj bias) is not implemented", cfg.source)
	}
	if d.HS%2 != 0 {
		return dims{}, fmt.Errorf("model: head size %d is odd; rotate-half RoPE needs an even head size", d.HS)
	}
	return d, nil
}

// InitRandom fills the parameters as Hugging Face initialises a fresh
// model: normal(0, initializer_range) matrices and embeddings, ones for
// norm weights, zeros for biases. The same seed gives the same weights.
func (m *Model) InitRandom(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	std := m.Config.InitializerRange
	if std <= 0 {
		std = 0.02
	}
	host := make([]float32, m.Params.Len())
	for _, s := range m.specs {
		v := host[s.Off : s.Off+s.size()]
		switch {
		case strings.HasSuffix(s.Name, "norm.weight"):
			for i := range v {
				v[i] = 1
			}
		case strings.HasSuffix(s.Name, ".bias"):
			clear(v)
		default:
			for i := range v {
				v[i] = float32(std * rng.NormFloat64())
			}
		}
	}
	m.Dev.Upload(m.Params, host)
	m.packTiles()
}

// LoadOptions says how a loaded model is stored.
type LoadOptions struct {
	// Frozen models have no gradient arena: a reference policy, a frozen
	// base under LoRA adapters.
	Frozen bool
	// DType of the stored weights: "float32" (default) or, for a frozen
	// model on a device that stores StoreBF16, "bfloat16"; "auto" picks
	// bfloat16 for a frozen model whose folder stores every tensor it needs
	// as BF16 (so nothing is rounded) and float32 otherwise.
	DType string
	// BF16Products lets the products with bf16 weights round their
	// float32 inputs to bf16 and sum on the CPU's bf16 dot product
	// (AVX512_BF16's VDPBF16PS, twice the float32 rate) where it has one:
	// a rollout copy samples from these weights, as a bf16 inference
	// engine would. Without it (a reference policy) products stay exact:
	// the weights widen to float32. Ignored for float32 weights.
	BF16Products bool
}

// Load reads a Hugging Face folder (config.json and safetensors, single
// file or sharded) into a new trainable float32 model on dev. Every tensor
// the model needs must be present with the shape the config implies; a
// critic loaded from a policy checkpoint gets a fresh value head (seeded
// from the folder's name) and ignores lm_head.weight.
func Load(dir string, dev Device, head Head) (*Model, error) {
	return LoadWith(dir, dev, head, LoadOptions{})
}

// loadChunk is the number of values converted through host memory at a
// time when the arena is not host memory itself (a GPU, or bf16 storage):
// loading never holds a second full copy of the weights.
const loadChunk = 1 << 20

// LoadWith is Load with a storage choice (see LoadOptions). Weights are
// decoded straight into the parameter arena where it is host memory, and
// in chunks of loadChunk values otherwise.
func LoadWith(dir string, dev Device, head Head, opt LoadOptions) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	d, err := dimsOf(cfg, head)
	if err != nil {
		return nil, err
	}
	w, err := OpenWeights(dir)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	specs, _ := layout(d)
	if opt.DType == "auto" {
		opt.DType = "float32"
		if Stores(dev, StoreBF16) && opt.Frozen && storedAs(w, specs, safetensors.BF16) {
			opt.DType = "bfloat16"
		}
	}
	m, err := NewWith(cfg, dev, head, opt)
	if err != nil {
		return nil, err
	}
	names := w.Names()
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	freshValueHead := false
	var chunk []float32
	for _, s := range m.specs {
		if !have[s.Name] {
			if head == ValueHeadOutput && strings.HasPrefix(s.Name, "score.") {
				freshValueHead = true
				continue
			}
			return nil, fmt.Errorf("model: %s: tensor %s is missing", dir, s.Name)
		}
		shape, _ := w.Shape(s.Name)
		if !slices.Equal(shape, s.Shape) {
			return nil, fmt.Errorf("model: %s: tensor %s has shape %v, the config implies %v", dir, s.Name, shape, s.Shape)
		}
		dst := m.Params.Slice(s.Off, s.size())
		if host, ok := HostF32(m.Dev, dst); ok {
			if err := w.ReadF32(s.Name, host); err != nil {
				return nil, err
			}
			if !finite(host) {
				return nil, fmt.Errorf("model: %s: tensor %s holds NaN or Inf", dir, s.Name)
			}
			if raw, err := w.dir.Bytes(s.Name); err == nil && w.dir.Mapped(s.Name) {
				pages.Drop(raw)
			}
		} else {
			info, _ := w.dir.Info(s.Name)
			raw, err := w.dir.Bytes(s.Name)
			if err != nil {
				return nil, err
			}
			size := info.DType.Size()
			if chunk == nil {
				chunk = make([]float32, loadChunk)
			}
			for i := 0; i < s.size(); i += loadChunk {
				n := min(loadChunk, s.size()-i)
				if err := safetensors.DecodeF32(chunk[:n], raw[i*size:(i+n)*size], info.DType); err != nil {
					return nil, fmt.Errorf("model: %s: tensor %s: %w", dir, s.Name, err)
				}
				if !finite(chunk[:n]) {
					return nil, fmt.Errorf("model: %s: tensor %s holds NaN or Inf", dir, s.Name)
				}
				m.Dev.Upload(dst.Slice(i, n), chunk[:n])
			}
			if w.dir.Mapped(s.Name) {
				pages.Drop(raw)
			}
		}
		delete(have, s.Name)
	}
	for _, n := range names {
		if !have[n] {
			continue
		}
		ignorable := n == "lm_head.weight" && (head == ValueHeadOutput || cfg.TieWordEmbeddings) ||
			strings.HasPrefix(n, "score.") && head == LMHeadOutput
		if !ignorable {
			return nil, fmt.Errorf("model: %s: unexpected tensor %s for a %s model", dir, n, cfg.ModelType)
		}
	}
	if freshValueHead {
		m.initValueHead(0x5eed)
	}
	m.packTiles() // the matrices were read in rows
	return m, nil
}

// storedAs says whether every tensor of specs that the folder holds is
// stored as dtype.
func storedAs(w *Weights, specs []tensorSpec, dtype safetensors.DType) bool {
	for _, s := range specs {
		if info, ok := w.dir.Info(s.Name); ok && info.DType != dtype {
			return false
		}
	}
	return true
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// initValueHead draws a fresh critic head: small normal weights, zero bias.
func (m *Model) initValueHead(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, m.d.C)
	for i := range v {
		v[i] = float32(0.02 * rng.NormFloat64())
	}
	m.Dev.Upload(m.p.vw, v)
	m.Dev.Zero(m.p.vb)
}

// Save writes the model as a Hugging Face folder that transformers and vLLM
// load unchanged: tied embeddings are stored once, as transformers does.
// A float32 CPU arena is written from in place, without a host copy. A
// model with LoRA adapters is saved merged (see SaveMerged).
func (m *Model) Save(dir string, gen *GenerationConfig, opt SaveOptions) error {
	if m.lora != nil {
		return m.SaveMerged(dir, gen, opt)
	}
	host, ok := HostF32(m.Dev, m.Params)
	if m.SaveFrom != nil {
		if len(m.SaveFrom) != m.Params.Len() {
			return fmt.Errorf("model: Save: SaveFrom holds %d values for %d parameters", len(m.SaveFrom), m.Params.Len())
		}
		host, ok = m.SaveFrom, true
	}
	if !ok {
		host = make([]float32, m.Params.Len())
		m.Dev.Download(host, m.Params)
	}
	tensors := make([]NamedTensor, 0, len(m.specs))
	for _, s := range m.specs {
		tensors = append(tensors, NamedTensor{Name: s.Name, Shape: s.Shape, Data: host[s.Off : s.Off+s.size()]})
	}
	return SaveFolder(dir, m.Config, gen, tensors, opt)
}

// Clone returns a model with the same config and a copy of the weights on
// the same device (a frozen reference policy, for instance).
func (m *Model) Clone() (*Model, error) {
	return m.CloneWith(LoadOptions{})
}

// CloneWith copies the weights into a model stored as opt says: a frozen
// bfloat16 reference policy costs a quarter of a trainable float32 copy
// (no gradients, half-size weights), its weights rounded to bf16.
func (m *Model) CloneWith(opt LoadOptions) (*Model, error) {
	return m.CloneOn(m.Dev, opt)
}

// CloneOn is CloneWith onto dev, another instance of m's device kind (a
// CPU device with threads of its own, for a rollout that runs beside the
// update): dev must read m's buffers in its Copy.
func (m *Model) CloneOn(dev Device, opt LoadOptions) (*Model, error) {
	if opt.DType == "auto" {
		opt.DType = "float32"
	}
	if len(m.tiles) > 0 {
		return nil, errTileSource
	}
	c, err := NewWith(m.Config, dev, m.Head, opt)
	if err != nil {
		return nil, err
	}
	dev.Copy(c.Params, m.Params)
	c.packTiles()
	return c, nil
}
