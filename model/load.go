package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
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
}

// Load reads a Hugging Face folder (config.json and safetensors, single
// file or sharded) into a new model on dev. Every tensor the model needs
// must be present with the shape the config implies; a critic loaded from
// a policy checkpoint gets a fresh value head (seeded from the folder's
// name) and ignores lm_head.weight.
func Load(dir string, dev Device, head Head) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	m, err := New(cfg, dev, head)
	if err != nil {
		return nil, err
	}
	w, err := OpenWeights(dir)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	names := w.Names()
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	host := make([]float32, m.Params.Len())
	freshValueHead := false
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
		if err := w.ReadF32(s.Name, host[s.Off:s.Off+s.size()]); err != nil {
			return nil, err
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
	for _, v := range host {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("model: %s: weights hold NaN or Inf", dir)
		}
	}
	m.Dev.Upload(m.Params, host)
	if freshValueHead {
		m.initValueHead(0x5eed)
	}
	return m, nil
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
func (m *Model) Save(dir string, gen *GenerationConfig, opt SaveOptions) error {
	host := make([]float32, m.Params.Len())
	m.Dev.Download(host, m.Params)
	tensors := make([]NamedTensor, 0, len(m.specs))
	for _, s := range m.specs {
		tensors = append(tensors, NamedTensor{Name: s.Name, Shape: s.Shape, Data: host[s.Off : s.Off+s.size()]})
	}
	return SaveFolder(dir, m.Config, gen, tensors, opt)
}

// Clone returns a model with the same config and a copy of the weights on
// the same device (a frozen reference policy, for instance).
func (m *Model) Clone() (*Model, error) {
	c, err := New(m.Config, m.Dev, m.Head)
	if err != nil {
		return nil, err
	}
	m.Dev.Copy(c.Params, m.Params)
	return c, nil
}
