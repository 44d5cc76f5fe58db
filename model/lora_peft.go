package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/r1go/r1go/model/safetensors"
)

// The PEFT adapter folder: adapter_config.json (PEFT's LoraConfig as JSON)
// and adapter_model.safetensors, whose keys are the adapted module paths
// under the PeftModel wrapper's prefix, e.g.
// base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight [r, in]
// and ...q_proj.lora_B.weight [out, r], stored without the adapter name.

const (
	peftConfigFile  = "adapter_config.json"
	peftWeightsFile = "adapter_model.safetensors"
	peftPrefix      = "base_model.model."
)

// peftConfig is the part of adapter_config.json this package reads and writes.
type peftConfig struct {
	AlphaPattern      map[string]any `json:"alpha_pattern"`
	AutoMapping       any            `json:"auto_mapping"`
	BaseModel         string         `json:"base_model_name_or_path"`
	Bias              string         `json:"bias"`
	FanInFanOut       bool           `json:"fan_in_fan_out"`
	InferenceMode     bool           `json:"inference_mode"`
	InitLoraWeights   bool           `json:"init_lora_weights"`
	LayersPattern     any            `json:"layers_pattern"`
	LayersToTransform any            `json:"layers_to_transform"`
	LoraAlpha         float64        `json:"lora_alpha"`
	LoraDropout       float64        `json:"lora_dropout"`
	ModulesToSave     any            `json:"modules_to_save"`
	PeftType          string         `json:"peft_type"`
	R                 int            `json:"r"`
	RankPattern       map[string]any `json:"rank_pattern"`
	Revision          any            `json:"revision"`
	TargetModules     any            `json:"target_modules"`
	TaskType          string         `json:"task_type"`
	UseDora           bool           `json:"use_dora"`
	UseRslora         bool           `json:"use_rslora"`
}

// SaveAdapter writes the adapters as a PEFT folder (float32 tensors);
// base names the base model in adapter_config.json.
func (lo *LoRA) SaveAdapter(dir string, dev Device, base string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	host, ok := HostF32(dev, lo.Params)
	if !ok {
		host = make([]float32, lo.Params.Len())
		dev.Download(host, lo.Params)
	}
	var ts []safetensors.Tensor
	for _, s := range lo.specs {
		ts = append(ts, safetensors.Tensor{Name: peftPrefix + s.Name, DType: safetensors.F32, Shape: s.Shape, F32: host[s.Off : s.Off+s.size()]})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, peftWeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	c := peftConfig{AlphaPattern: map[string]any{}, RankPattern: map[string]any{}, BaseModel: base, Bias: "none",
		InferenceMode: true, InitLoraWeights: true, LoraAlpha: lo.Config.Alpha, LoraDropout: lo.Config.Dropout,
		PeftType: "LORA", R: lo.Config.Rank, TargetModules: lo.Config.TargetModules, TaskType: "CAUSAL_LM"}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, peftConfigFile), append(raw, '\n'), 0o644)
}

// ReadAdapterConfig reads a PEFT adapter_config.json into a LoRAConfig,
// refusing the PEFT features this package does not compute (DoRA, biases,
// per-module ranks, fan_in_fan_out, rsLoRA, module regexes).
func ReadAdapterConfig(dir string) (LoRAConfig, error) {
	path := filepath.Join(dir, peftConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("lora: %w", err)
	}
	var c peftConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return LoRAConfig{}, fmt.Errorf("lora: %s: %v", path, err)
	}
	fail := func(format string, args ...any) (LoRAConfig, error) {
		return LoRAConfig{}, fmt.Errorf("lora: %s: "+format, append([]any{path}, args...)...)
	}
	switch {
	case c.PeftType != "LORA":
		return fail("peft_type %q is not LORA", c.PeftType)
	case c.UseDora || c.UseRslora || c.FanInFanOut:
		return fail("use_dora, use_rslora and fan_in_fan_out are not supported")
	case c.Bias != "" && c.Bias != "none":
		return fail("bias %q: only none is supported", c.Bias)
	case len(c.RankPattern) > 0 || len(c.AlphaPattern) > 0:
		return fail("rank_pattern and alpha_pattern are not supported")
	case c.LayersToTransform != nil:
		return fail("layers_to_transform is not supported")
	}
	cfg := LoRAConfig{Rank: c.R, Alpha: c.LoraAlpha, Dropout: c.LoraDropout}
	switch t := c.TargetModules.(type) {
	case string:
		if t != "all-linear" {
			return fail("target_modules %q: a regular expression is not supported; list the modules", t)
		}
		cfg.TargetModules = []string{"all-linear"}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return fail("target_modules holds %v, not a name", e)
			}
			cfg.TargetModules = append(cfg.TargetModules, s)
		}
	default:
		return fail("target_modules is missing")
	}
	if err := cfg.Validate(); err != nil {
		return fail("%v", err)
	}
	if !cfg.Enabled() {
		return fail("r %d must be ≥ 1", c.R)
	}
	return cfg, nil
}

// LoadAdapter attaches the adapters of a PEFT folder to a frozen model, to
// run or to continue training them. Every adapter tensor the config
// implies must be present with its shape; others are an error.
func (m *Model) LoadAdapter(dir string) (*LoRA, error) {
	cfg, err := ReadAdapterConfig(dir)
	if err != nil {
		return nil, err
	}
	lo, err := m.AttachLoRA(cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := lo.readWeights(m.Dev, dir); err != nil {
		m.lora = nil
		return nil, err
	}
	return lo, nil
}

// RestoreAdapter copies the adapter weights of a PEFT folder into the
// model's attached adapters (resuming a run): the folder's rank, alpha and
// target modules must be the attached ones.
func (m *Model) RestoreAdapter(dir string) error {
	lo := m.lora
	if lo == nil {
		return fmt.Errorf("lora: %s: the model has no adapters to restore into", dir)
	}
	cfg, err := ReadAdapterConfig(dir)
	if err != nil {
		return err
	}
	if cfg.Rank != lo.Config.Rank || cfg.Alpha != lo.Config.Alpha || !slices.Equal(cfg.TargetModules, lo.Config.TargetModules) {
		return fmt.Errorf("lora: %s: adapters r=%d alpha=%v on %v, the run has r=%d alpha=%v on %v", dir,
			cfg.Rank, cfg.Alpha, cfg.TargetModules, lo.Config.Rank, lo.Config.Alpha, lo.Config.TargetModules)
	}
	return lo.readWeights(m.Dev, dir)
}

// readWeights fills the adapters from dir's adapter_model.safetensors.
func (lo *LoRA) readWeights(dev Device, dir string) error {
	path := filepath.Join(dir, peftWeightsFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	have := map[string]bool{}
	for _, n := range f.Names() {
		have[n] = true
	}
	host := make([]float32, lo.Params.Len())
	for _, s := range lo.specs {
		name := peftPrefix + s.Name
		info, ok := f.Info(name)
		if !ok {
			return fmt.Errorf("lora: %s: tensor %s is missing", path, name)
		}
		if !slices.Equal(info.Shape, s.Shape) {
			return fmt.Errorf("lora: %s: tensor %s has shape %v, the config implies %v", path, name, info.Shape, s.Shape)
		}
		if err := f.ReadF32(name, host[s.Off:s.Off+s.size()]); err != nil {
			return err
		}
		delete(have, name)
	}
	for n := range have {
		return fmt.Errorf("lora: %s: unexpected tensor %s for adapters on %s", path, n, strings.Join(lo.Config.TargetModules, ", "))
	}
	dev.Upload(lo.Params, host)
	return nil
}

// SaveMerged writes the base model with every adapter merged in
// (W + (alpha/r)·B·A) as a Hugging Face folder, for inference without PEFT.
func (m *Model) SaveMerged(dir string, gen *GenerationConfig, opt SaveOptions) error {
	lo := m.lora
	if lo == nil {
		return m.Save(dir, gen, opt)
	}
	host := make([]float32, m.Params.Len())
	m.Dev.Download(host, m.Params)
	ad := make([]float32, lo.Params.Len())
	m.Dev.Download(ad, lo.Params)
	at := map[string]tensorSpec{}
	for _, s := range m.specs {
		at[s.Name] = s
	}
	r := lo.Config.Rank
	for _, s := range lo.specs {
		if !strings.HasSuffix(s.Name, ".lora_A.weight") {
			continue
		}
		mod := strings.TrimSuffix(s.Name, ".lora_A.weight")
		var sb tensorSpec
		for _, t := range lo.specs {
			if t.Name == mod+".lora_B.weight" {
				sb = t
			}
		}
		w := at[mod+".weight"]
		out, in := w.Shape[0], w.Shape[1]
		A, B := ad[s.Off:s.Off+r*in], ad[sb.Off:sb.Off+out*r]
		W := host[w.Off : w.Off+out*in]
		for i := 0; i < out; i++ {
			for q := 0; q < r; q++ {
				bq := float64(lo.Scale) * float64(B[i*r+q])
				for j := 0; j < in; j++ {
					W[i*in+j] += float32(bq * float64(A[q*in+j]))
				}
			}
		}
	}
	tensors := make([]NamedTensor, 0, len(m.specs))
	for _, s := range m.specs {
		tensors = append(tensors, NamedTensor{Name: s.Name, Shape: s.Shape, Data: host[s.Off : s.Off+s.size()]})
	}
	return SaveFolder(dir, m.Config, gen, tensors, opt)
}
