package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/r1go/r1go/model/safetensors"
)

// NamedTensor is one float32 tensor under its Hugging Face name, row-major.
type NamedTensor struct {
	Name  string
	Shape []int
	Data  []float32 // len = prod(Shape)
}

// NamedShape is a tensor name and the shape the config implies for it.
type NamedShape struct {
	Name  string
	Shape []int
}

// SaveOptions controls SaveFolder.
type SaveOptions struct {
	DType         string // "bfloat16" (default), "float32" or "float16"
	MaxShardBytes int64  // shard limit in tensor bytes; default 5e9, transformers' "5GB"
	TokenizerDir  string // when set, tokenizer files found here are copied byte for byte
}

// tokenizer files a Hugging Face folder may hold; SaveFolder copies those
// that exist in SaveOptions.TokenizerDir.
var hfTokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
	"chat_template.jinja", "special_tokens_map.json", "added_tokens.json"}

// GenerationConfig is a Hugging Face generation_config.json: the decoding
// defaults a checkpoint ships. Like Config it keeps the original JSON, so
// JSON() writes the user's other keys back unchanged.
type GenerationConfig struct {
	BOSTokenID          int   // -1 when null or absent
	EOSTokenIDs         []int // an int or a list in the file; Qwen2.5 stops on both 151645 and 151643
	PadTokenID          int   // -1 when null or absent
	DoSample            bool
	Temperature         float64
	TopP                float64
	TopK                int
	RepetitionPenalty   float64
	MaxNewTokens        int // 0 when absent
	TransformersVersion string

	source  string
	keys    []string
	raw     map[string]json.RawMessage
	parsed  *GenerationConfig
	eosList bool
}

// DefaultGenerationConfig is Qwen2.5-Instruct's generation_config.json:
// sampling at temperature 0.7, top-p 0.8, top-k 20, repetition penalty 1.05.
func DefaultGenerationConfig() *GenerationConfig {
	return &GenerationConfig{BOSTokenID: 151643, EOSTokenIDs: []int{151645, 151643}, PadTokenID: 151643,
		DoSample: true, Temperature: 0.7, TopP: 0.8, TopK: 20, RepetitionPenalty: 1.05, eosList: true}
}

// LoadGenerationConfig reads a generation_config.json. Absent keys take
// transformers' GenerationConfig defaults (greedy, temperature 1, top-p 1,
// top-k 50, no repetition penalty).
func LoadGenerationConfig(path string) (*GenerationConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	keys, raw, err := hfReadObject(data, path)
	if err != nil {
		return nil, err
	}
	g := &GenerationConfig{source: path, keys: keys, raw: raw, BOSTokenID: -1, PadTokenID: -1,
		Temperature: 1, TopP: 1, TopK: 50, RepetitionPenalty: 1}
	for _, f := range []struct {
		key string
		dst any
	}{
		{"bos_token_id", &g.BOSTokenID}, {"pad_token_id", &g.PadTokenID}, {"do_sample", &g.DoSample},
		{"temperature", &g.Temperature}, {"top_p", &g.TopP}, {"top_k", &g.TopK},
		{"repetition_penalty", &g.RepetitionPenalty}, {"max_new_tokens", &g.MaxNewTokens},
		{"transformers_version", &g.TransformersVersion},
	} {
		if v, ok := raw[f.key]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return nil, fmt.Errorf("model: %s: field %s: %s is not a valid %s", path, f.key, hfShort(v), hfKind(f.dst))
			}
		}
	}
	if g.EOSTokenIDs, g.eosList, err = hfTokenIDs(raw["eos_token_id"], path, "eos_token_id"); err != nil {
		return nil, err
	}
	switch {
	case g.Temperature < 0 || g.TopP < 0 || g.TopP > 1 || g.TopK < 0 || g.RepetitionPenalty <= 0:
		return nil, fmt.Errorf("model: %s: sampling values out of range: temperature %g, top_p %g, top_k %d, repetition_penalty %g",
			path, g.Temperature, g.TopP, g.TopK, g.RepetitionPenalty)
	}
	snapshot := *g
	g.parsed = &snapshot
	return g, nil
}

// JSON renders generation_config.json, keeping a loaded file's other keys
// and values as written; a config built in code gets its keys sorted.
func (g *GenerationConfig) JSON() ([]byte, error) {
	keys := append([]string(nil), g.keys...)
	raw := map[string]json.RawMessage{}
	for k, v := range g.raw {
		raw[k] = v
	}
	fresh := g.parsed == nil
	tokenID := func(id int) any {
		if id < 0 {
			return nil
		}
		return id
	}
	eos := func(x *GenerationConfig) any {
		if len(x.EOSTokenIDs) == 1 && !x.eosList {
			return x.EOSTokenIDs[0]
		}
		return x.EOSTokenIDs
	}
	for _, f := range []struct {
		key  string
		get  func(*GenerationConfig) any
		omit bool
	}{
		{"bos_token_id", func(x *GenerationConfig) any { return tokenID(x.BOSTokenID) }, g.BOSTokenID < 0},
		{"eos_token_id", eos, g.EOSTokenIDs == nil},
		{"pad_token_id", func(x *GenerationConfig) any { return tokenID(x.PadTokenID) }, g.PadTokenID < 0},
		{"do_sample", func(x *GenerationConfig) any { return x.DoSample }, false},
		{"temperature", func(x *GenerationConfig) any { return x.Temperature }, false},
		{"top_p", func(x *GenerationConfig) any { return x.TopP }, false},
		{"top_k", func(x *GenerationConfig) any { return x.TopK }, false},
		{"repetition_penalty", func(x *GenerationConfig) any { return x.RepetitionPenalty }, false},
		{"max_new_tokens", func(x *GenerationConfig) any { return x.MaxNewTokens }, g.MaxNewTokens == 0},
		{"transformers_version", func(x *GenerationConfig) any { return x.TransformersVersion }, g.TransformersVersion == ""},
	} {
		if !fresh && reflect.DeepEqual(f.get(g), f.get(g.parsed)) {
			continue
		}
		if f.omit {
			delete(raw, f.key)
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == f.key })
			continue
		}
		b, _ := json.Marshal(f.get(g))
		if _, ok := raw[f.key]; !ok {
			keys = append(keys, f.key)
		}
		raw[f.key] = b
	}
	if fresh {
		slices.Sort(keys)
	}
	return hfWriteObject(keys, raw)
}

// ExpectedTensors lists the tensors of a Qwen2ForCausalLM, Qwen3ForCausalLM
// or LlamaForCausalLM checkpoint in transformers' module order, with nn.Linear
// shapes [out, in]. lm_head.weight is listed only when the embeddings are
// not tied, because transformers does not store the tied copy.
func ExpectedTensors(cfg *Config) []NamedShape {
	h, i, v := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	q, kv := cfg.NumAttentionHeads*cfg.HeadDim(), cfg.KVDim()
	out := []NamedShape{{"model.embed_tokens.weight", []int{v, h}}}
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(name string, shape ...int) { out = append(out, NamedShape{p + name, shape}) }
		add("input_layernorm.weight", h)
		add("self_attn.q_proj.weight", q, h)
		if cfg.QKVBias() {
			add("self_attn.q_proj.bias", q)
		}
		add("self_attn.k_proj.weight", kv, h)
		if cfg.QKVBias() {
			add("self_attn.k_proj.bias", kv)
		}
		add("self_attn.v_proj.weight", kv, h)
		if cfg.QKVBias() {
			add("self_attn.v_proj.bias", kv)
		}
		add("self_attn.o_proj.weight", h, q)
		if cfg.QKNorm() {
			add("self_attn.q_norm.weight", cfg.HeadDim())
			add("self_attn.k_norm.weight", cfg.HeadDim())
		}
		add("post_attention_layernorm.weight", h)
		add("mlp.gate_proj.weight", i, h)
		add("mlp.up_proj.weight", i, h)
		add("mlp.down_proj.weight", h, i)
	}
	out = append(out, NamedShape{"model.norm.weight", []int{h}})
	if !cfg.TieWordEmbeddings {
		out = append(out, NamedShape{"lm_head.weight", []int{v, h}})
	}
	return out
}

// Weights are the safetensors weights of a Hugging Face folder, single file
// or sharded, memory-mapped. Reads are safe from several goroutines.
type Weights struct {
	dir *safetensors.Dir
}

// OpenWeights opens dir's model.safetensors, or its shards through
// model.safetensors.index.json (every shard must exist and hold exactly the
// tensors the index maps to it). Errors name the file and the tensor.
func OpenWeights(dir string) (*Weights, error) {
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	return &Weights{dir: d}, nil
}

// Names lists every tensor, sorted.
func (w *Weights) Names() []string { return w.dir.Names() }

// Shape is the stored shape of a tensor.
func (w *Weights) Shape(name string) ([]int, bool) {
	info, ok := w.dir.Info(name)
	if !ok {
		return nil, false
	}
	return slices.Clone(info.Shape), true
}

// ReadF32 converts a tensor from its stored dtype (F32, BF16 or F16) into
// dst, whose length must be the tensor's element count.
func (w *Weights) ReadF32(name string, dst []float32) error { return w.dir.ReadF32(name, dst) }

// Close unmaps every file.
func (w *Weights) Close() error { return w.dir.Close() }

// CheckWeights compares the stored tensors with ExpectedTensors(cfg) and
// reports, by name, every missing tensor, every unexpected one and every
// shape that disagrees with the config. A stored lm_head.weight is allowed
// with tied embeddings (transformers ignores it) if its shape is right.
func CheckWeights(w *Weights, cfg *Config) error {
	var problems []string
	want := map[string][]int{}
	for _, t := range ExpectedTensors(cfg) {
		want[t.Name] = t.Shape
		got, ok := w.Shape(t.Name)
		switch {
		case !ok:
			problems = append(problems, "tensor "+t.Name+" is missing")
		case !slices.Equal(got, t.Shape):
			problems = append(problems, fmt.Sprintf("tensor %s has shape %v, the config implies %v", t.Name, got, t.Shape))
		}
	}
	for _, name := range w.Names() {
		if _, ok := want[name]; ok {
			continue
		}
		if name == "lm_head.weight" && cfg.TieWordEmbeddings {
			if got, _ := w.Shape(name); !slices.Equal(got, []int{cfg.VocabSize, cfg.HiddenSize}) {
				problems = append(problems, fmt.Sprintf("tensor %s has shape %v, the config implies %v", name, got, []int{cfg.VocabSize, cfg.HiddenSize}))
			}
			continue
		}
		problems = append(problems, "unexpected tensor "+name)
	}
	if len(problems) == 0 {
		return nil
	}
	more := ""
	if len(problems) > 10 {
		more = fmt.Sprintf("; and %d more", len(problems)-10)
		problems = problems[:10]
	}
	return fmt.Errorf("model: %s: weights do not match the %s config: %s%s", w.dir.Path, cfg.ModelType, strings.Join(problems, "; "), more)
}

// SaveFolder writes a Hugging Face model folder that transformers and vLLM
// load as is: config.json (the user's keys, dtype set), generation_config.json
// (gen, or the config's token ids when gen is nil), the weights as
// model.safetensors or shards plus model.safetensors.index.json with
// {"format": "pt"} metadata, and the tokenizer files of opt.TokenizerDir.
//
// Every tensor of ExpectedTensors(cfg) must be given with its shape; with
// tied embeddings lm_head.weight is dropped, as transformers drops it;
// further tensors (a critic's score head) are written after them. The folder
// appears whole or not at all: it is written into a temporary folder beside
// dir and renamed into place, replacing an existing dir only at that point.
func SaveFolder(dir string, cfg *Config, gen *GenerationConfig, tensors []NamedTensor, opt SaveOptions) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if opt.DType == "" {
		opt.DType = "bfloat16"
	}
	dtype, ok := safetensors.ParseDType(opt.DType)
	if !ok {
		return fmt.Errorf("model: save %s: dtype %q is not bfloat16, float32 or float16", dir, opt.DType)
	}
	opt.DType = map[safetensors.DType]string{safetensors.BF16: "bfloat16", safetensors.F32: "float32", safetensors.F16: "float16"}[dtype]
	if opt.MaxShardBytes == 0 {
		opt.MaxShardBytes = 5_000_000_000
	}
	ordered, err := cfg.hfOrderTensors(tensors, dtype)
	if err != nil {
		return fmt.Errorf("model: save %s: %w", dir, err)
	}
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".partial-")
	if err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if _, err := safetensors.WriteDir(tmp, ordered, map[string]string{"format": "pt"}, opt.MaxShardBytes); err != nil {
		return err
	}
	out := *cfg
	out.DType = opt.DType
	cfgJSON, err := out.JSON()
	if err != nil {
		return err
	}
	if gen == nil {
		gen = &GenerationConfig{BOSTokenID: cfg.BOSTokenID, EOSTokenIDs: cfg.EOSTokenIDs, PadTokenID: cfg.PadTokenID,
			Temperature: 1, TopP: 1, TopK: 50, RepetitionPenalty: 1, TransformersVersion: cfg.TransformersVersion,
			eosList: cfg.eosList}
	}
	genJSON, err := gen.JSON()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"config.json", cfgJSON}, {"generation_config.json", genJSON}} {
		if err := hfWriteSynced(filepath.Join(tmp, f.name), func(w io.Writer) error {
			_, err := w.Write(f.data)
			return err
		}); err != nil {
			return err
		}
	}
	if opt.TokenizerDir != "" {
		copied := 0
		for _, name := range hfTokenizerFiles {
			src, err := os.Open(filepath.Join(opt.TokenizerDir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("model: save: %w", err)
			}
			err = hfWriteSynced(filepath.Join(tmp, name), func(w io.Writer) error {
				_, err := io.Copy(w, src)
				return err
			})
			src.Close()
			if err != nil {
				return err
			}
			copied++
		}
		if copied == 0 {
			return fmt.Errorf("model: save %s: no tokenizer files (%s) in %s", dir, strings.Join(hfTokenizerFiles, ", "), opt.TokenizerDir)
		}
	}
	if err := hfSyncDir(tmp); err != nil {
		return err
	}
	// Swap the finished folder in. An existing dir moves aside first (a
	// directory cannot be renamed over a non-empty one) and is removed
	// after; a crash in between leaves both folders whole beside dir.
	var old string
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("model: save %s: exists and is not a folder", dir)
		}
		if old, err = os.MkdirTemp(parent, "."+filepath.Base(dir)+".old-"); err != nil {
			return fmt.Errorf("model: save: %w", err)
		}
		if err := os.Remove(old); err != nil {
			return fmt.Errorf("model: save: %w", err)
		}
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("model: save: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("model: save: %w", err)
	}
	done = true
	if old != "" {
		os.RemoveAll(old)
	}
	return hfSyncDir(parent)
}

// hfOrderTensors checks the tensors against the config and returns them for
// the writer: the expected ones in module order (so shards split as
// transformers splits them), a tied lm_head.weight dropped, extras last.
func (c *Config) hfOrderTensors(tensors []NamedTensor, dtype safetensors.DType) ([]safetensors.Tensor, error) {
	byName := map[string]*NamedTensor{}
	for k := range tensors {
		t := &tensors[k]
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("tensor %s given twice", t.Name)
		}
		n := 1
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %s has shape %v", t.Name, t.Shape)
			}
			n *= d
		}
		if len(t.Data) != n {
			return nil, fmt.Errorf("tensor %s has %d values for shape %v", t.Name, len(t.Data), t.Shape)
		}
		byName[t.Name] = t
	}
	var out []safetensors.Tensor
	used := map[string]bool{}
	for _, e := range ExpectedTensors(c) {
		t, ok := byName[e.Name]
		if !ok {
			return nil, fmt.Errorf("tensor %s is missing", e.Name)
		}
		if !slices.Equal(t.Shape, e.Shape) {
			return nil, fmt.Errorf("tensor %s has shape %v, the config implies %v", e.Name, t.Shape, e.Shape)
		}
		out = append(out, safetensors.Tensor{Name: t.Name, DType: dtype, Shape: t.Shape, F32: t.Data})
		used[e.Name] = true
	}
	for _, t := range tensors {
		if used[t.Name] || t.Name == "lm_head.weight" && c.TieWordEmbeddings {
			continue
		}
		out = append(out, safetensors.Tensor{Name: t.Name, DType: dtype, Shape: t.Shape, F32: t.Data})
	}
	return out, nil
}

// hfWriteSynced creates path, fills it with write and syncs it to disk.
func hfWriteSynced(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("model: save %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("model: save %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("model: save %s: %w", path, err)
	}
	return nil
}

// hfSyncDir makes a folder's entries durable; some systems cannot sync a
// folder, which is not an error worth failing a save for.
func hfSyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	d.Sync()
	return d.Close()
}

// SaveDTypeFor resolves a save_dtype setting for a model of config cfg:
// "" or "auto" keeps the source's dtype (its config's torch_dtype; float32
// for a config that names none), so a bf16 model is saved as bf16 and a
// float32 one bit for bit; bfloat16, float32 and float16 are taken as
// they are.
func SaveDTypeFor(cfg *Config, setting string) (string, error) {
	switch setting {
	case "", "auto":
		if cfg.DType == "" {
			return "float32", nil
		}
		return cfg.DType, nil
	case "bfloat16", "float32", "float16":
		return setting, nil
	}
	return "", fmt.Errorf("model: save dtype %q is not auto, bfloat16, float32 or float16", setting)
}
