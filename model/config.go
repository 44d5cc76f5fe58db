package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
)

// Config is a Hugging Face config.json for a Qwen2/Qwen2.5 (model_type
// "qwen2"), Qwen3 (model_type "qwen3") or Llama-style (model_type "llama")
// decoder. Field names follow
// the JSON keys. ParseConfig keeps the original JSON too, so JSON() writes
// the user's keys back unchanged except those whose field was changed and
// the dtype keys.
type Config struct {
	Architectures         []string // ["Qwen2ForCausalLM"], ["Qwen3ForCausalLM"] or ["LlamaForCausalLM"]
	ModelType             string   // "qwen2", "qwen3" or "llama"
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int // defaults to NumAttentionHeads when absent
	HeadDimOverride       int // "head_dim" when the file sets it; 0 derives HiddenSize/NumAttentionHeads
	VocabSize             int
	MaxPositionEmbeddings int
	RMSNormEps            float64
	RopeTheta             float64 // top-level rope_theta or rope_parameters.rope_theta (transformers 5)
	HiddenAct             string  // "silu"
	AttentionDropout      float64
	InitializerRange      float64
	BOSTokenID            int   // -1 when null or absent
	EOSTokenIDs           []int // eos_token_id, an int or a list in the file
	PadTokenID            int   // -1 when null or absent
	TieWordEmbeddings     bool
	UseSlidingWindow      bool
	SlidingWindow         int      // 0 when null
	MaxWindowLayers       int      // parsed; only matters with UseSlidingWindow
	LayerTypes            []string // transformers ≥ 4.55: "full_attention" per layer
	DType                 string   // "bfloat16", "float32" or "float16", from dtype or torch_dtype
	UseCache              bool
	TransformersVersion   string
	AttentionBias         bool // Llama's and Qwen3's attention_bias; Qwen2 always has q/k/v bias (see QKVBias)
	MLPBias               bool // Llama's mlp_bias; must be false

	source  string                     // file name for errors
	keys    []string                   // top-level keys of the original JSON, in order
	raw     map[string]json.RawMessage // their values as written
	parsed  *Config                    // the fields as parsed, to see what changed
	eosList bool                       // eos_token_id was a list
}

// LoadConfig reads and validates a config.json.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig parses and validates config.json content; name (usually the
// path) prefixes every error. Absent keys take transformers' Qwen2Config
// defaults, except the sizes, which must be present.
func ParseConfig(data []byte, name string) (*Config, error) {
	keys, raw, err := hfReadObject(data, name)
	if err != nil {
		return nil, err
	}
	c := &Config{source: name, keys: keys, raw: raw, BOSTokenID: -1, PadTokenID: -1,
		HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 10000, InitializerRange: 0.02,
		MaxPositionEmbeddings: 32768, UseCache: true, MaxWindowLayers: 28}
	field := func(key string, dst any) error {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("model: %s: field %s: %s is not a valid %s", name, key, hfShort(v), hfKind(dst))
		}
		return nil
	}
	for _, f := range []struct {
		key string
		dst any
	}{
		{"architectures", &c.Architectures}, {"model_type", &c.ModelType},
		{"hidden_size", &c.HiddenSize}, {"intermediate_size", &c.IntermediateSize},
		{"num_hidden_layers", &c.NumHiddenLayers}, {"num_attention_heads", &c.NumAttentionHeads},
		{"num_key_value_heads", &c.NumKeyValueHeads}, {"head_dim", &c.HeadDimOverride},
		{"vocab_size", &c.VocabSize}, {"max_position_embeddings", &c.MaxPositionEmbeddings},
		{"rms_norm_eps", &c.RMSNormEps}, {"rope_theta", &c.RopeTheta}, {"hidden_act", &c.HiddenAct},
		{"attention_dropout", &c.AttentionDropout}, {"initializer_range", &c.InitializerRange},
		{"bos_token_id", &c.BOSTokenID}, {"pad_token_id", &c.PadTokenID},
		{"tie_word_embeddings", &c.TieWordEmbeddings}, {"use_sliding_window", &c.UseSlidingWindow},
		{"sliding_window", &c.SlidingWindow}, {"max_window_layers", &c.MaxWindowLayers},
		{"layer_types", &c.LayerTypes}, {"torch_dtype", &c.DType}, {"dtype", &c.DType},
		{"use_cache", &c.UseCache}, {"transformers_version", &c.TransformersVersion},
		{"attention_bias", &c.AttentionBias}, {"mlp_bias", &c.MLPBias},
	} {
		if err := field(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, key := range []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"} {
		if v, ok := raw[key]; !ok || string(v) == "null" {
			return nil, fmt.Errorf("model: %s: field %s is missing", name, key)
		}
	}
	if v, ok := raw["num_key_value_heads"]; !ok || string(v) == "null" {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.EOSTokenIDs, c.eosList, err = hfTokenIDs(raw["eos_token_id"], name, "eos_token_id"); err != nil {
		return nil, err
	}
	if err := c.parseRope(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	snapshot := *c
	c.parsed = &snapshot
	return c, nil
}

// parseRope reads rope_parameters (transformers 5) and rope_scaling; only
// plain RoPE is supported, so any scaling type but "default" is an error.
func (c *Config) parseRope() error {
	if v, ok := c.raw["rope_parameters"]; ok && string(v) != "null" {
		var rp map[string]json.RawMessage
		if err := json.Unmarshal(v, &rp); err != nil {
			return fmt.Errorf("model: %s: field rope_parameters: %s is not an object", c.source, hfShort(v))
		}
		if err := hfRopeType(rp, c.source, "rope_parameters"); err != nil {
			return err
		}
		t, ok := rp["rope_theta"]
		if !ok {
			return fmt.Errorf("model: %s: rope_parameters has no rope_theta", c.source)
		}
		var theta float64
		if err := json.Unmarshal(t, &theta); err != nil {
			return fmt.Errorf("model: %s: rope_parameters.rope_theta: %s is not a number", c.source, hfShort(t))
		}
		if top, ok := c.raw["rope_theta"]; ok && string(top) != "null" && theta != c.RopeTheta {
			return fmt.Errorf("model: %s: rope_theta %g disagrees with rope_parameters.rope_theta %g", c.source, c.RopeTheta, theta)
		}
		c.RopeTheta = theta
	}
	if v, ok := c.raw["rope_scaling"]; ok && string(v) != "null" {
		var rs map[string]json.RawMessage
		if err := json.Unmarshal(v, &rs); err != nil {
			return fmt.Errorf("model: %s: field rope_scaling: %s is not an object or null", c.source, hfShort(v))
		}
		return hfRopeType(rs, c.source, "rope_scaling")
	}
	return nil
}

// hfRopeType accepts a rope block whose rope_type (or legacy type) is absent
// or "default".
func hfRopeType(block map[string]json.RawMessage, source, key string) error {
	for _, k := range []string{"rope_type", "type"} {
		v, ok := block[k]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("model: %s: %s.%s: %s is not a string", source, key, k, hfShort(v))
		}
		if s != "default" {
			return fmt.Errorf("model: %s: %s type %q is not supported (only plain RoPE, \"default\")", source, key, s)
		}
	}
	return nil
}

// Validate checks that the config describes a model this package runs:
// qwen2, qwen3 or llama, SiLU, consistent head counts, no sliding window in use,
// no rope scaling, no dropout, no Llama o_proj or MLP bias.
func (c *Config) Validate() error {
	fail := func(format string, args ...any) error {
		src := c.source
		if src == "" {
			src = "config"
		}
		return fmt.Errorf("model: %s: %s", src, fmt.Sprintf(format, args...))
	}
	arch := map[string]string{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[c.ModelType]
	if arch == "" {
		return fail("model_type %q is not supported (want \"qwen2\", \"qwen3\" or \"llama\")", c.ModelType)
	}
	if len(c.Architectures) > 0 {
		found := false
		for _, a := range c.Architectures {
			found = found || a == arch
		}
		if !found {
			return fail("architectures %v: want %s for model_type %q", c.Architectures, arch, c.ModelType)
		}
	}
	for _, f := range []struct {
		key string
		v   int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"vocab_size", c.VocabSize},
	} {
		if f.v <= 0 {
			return fail("%s = %d, must be positive", f.key, f.v)
		}
		// Far beyond any real model; keeps sizes and counts from overflowing.
		if f.v > 1<<24 || f.key == "num_hidden_layers" && f.v > 4096 {
			return fail("%s = %d is implausibly large", f.key, f.v)
		}
	}
	if c.HeadDimOverride < 0 || c.HeadDimOverride > 1<<16 {
		return fail("head_dim = %d, must be positive", c.HeadDimOverride)
	}
	if c.HeadDimOverride == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fail("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fail("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HiddenAct != "silu" && c.HiddenAct != "swish" {
		return fail("hidden_act %q is not supported (only silu)", c.HiddenAct)
	}
	if !(c.RMSNormEps > 0) || !(c.RopeTheta > 0) {
		return fail("rms_norm_eps %g and rope_theta %g must be positive", c.RMSNormEps, c.RopeTheta)
	}
	if c.AttentionDropout != 0 {
		return fail("attention_dropout %g is not supported (the model has no dropout)", c.AttentionDropout)
	}
	if c.ModelType != "qwen2" && c.AttentionBias {
		return fail("attention_bias true is not supported for %s (it adds an o_proj bias)", c.ModelType)
	}
	if c.MLPBias {
		return fail("mlp_bias true is not supported")
	}
	switch c.DType {
	case "", "bfloat16", "float32", "float16":
	default:
		return fail("dtype %q is not supported (bfloat16, float32 or float16)", c.DType)
	}
	if c.LayerTypes != nil && len(c.LayerTypes) != c.NumHiddenLayers {
		return fail("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		switch t {
		case "full_attention":
		case "sliding_attention":
			return fail("layer_types[%d] is sliding_attention: sliding-window attention is not supported", i)
		default:
			return fail("layer_types[%d] = %q is not an attention type", i, t)
		}
	}
	// transformers' Qwen2 (and Qwen3) rule: layers from max_window_layers on slide when
	// use_sliding_window is set and sliding_window is not null.
	if c.UseSlidingWindow && c.SlidingWindow > 0 && c.MaxWindowLayers < c.NumHiddenLayers {
		return fail("use_sliding_window is true with sliding_window %d from layer %d on: sliding-window attention is not supported",
			c.SlidingWindow, c.MaxWindowLayers)
	}
	return nil
}

// HeadDim is the size of one attention head.
func (c *Config) HeadDim() int {
	if c.HeadDimOverride > 0 {
		return c.HeadDimOverride
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// KVDim is the width of the k and v projections: kv heads × head size.
func (c *Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim() }

// QKVBias reports whether q_proj, k_proj and v_proj carry biases: always for
// Qwen2, attention_bias for Llama and Qwen3 (which Validate keeps false).
func (c *Config) QKVBias() bool { return c.ModelType == "qwen2" || c.AttentionBias }

// QKNorm reports whether each head's query and key pass through an RMSNorm
// (self_attn.q_norm and k_norm, weights [head_dim]) before RoPE: Qwen3.
func (c *Config) QKNorm() bool { return c.ModelType == "qwen3" }

// ParamCount is the number of parameters stored in the checkpoint (a tied
// lm_head is stored once, as transformers counts it).
func (c *Config) ParamCount() int64 {
	var n int64
	for _, t := range ExpectedTensors(c) {
		p := int64(1)
		for _, d := range t.Shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}

// JSON renders the config as config.json. A parsed config keeps its keys,
// their order and their values as written, except keys whose field changed
// since parsing and the dtype keys (torch_dtype and dtype where present,
// torch_dtype when neither is), which take DType. A config built in code
// gets every key, sorted as transformers writes them.
func (c *Config) JSON() ([]byte, error) {
	keys := append([]string(nil), c.keys...)
	raw := map[string]json.RawMessage{}
	for k, v := range c.raw {
		raw[k] = v
	}
	set := func(key string, v any) {
		b, _ := json.Marshal(v) // plain values always marshal
		if _, ok := raw[key]; !ok {
			keys = append(keys, key)
		}
		raw[key] = b
	}
	fresh := c.parsed == nil
	for _, f := range c.hfFields() {
		if fresh || !reflect.DeepEqual(f.get(c), f.get(c.parsed)) {
			if f.key == "rope_theta" && !fresh {
				if err := c.hfSetRopeTheta(raw, set); err != nil {
					return nil, err
				}
				continue
			}
			if f.omit(c) {
				if _, ok := raw[f.key]; ok {
					delete(raw, f.key)
					keys = slices.DeleteFunc(keys, func(k string) bool { return k == f.key })
				}
				continue
			}
			set(f.key, f.get(c))
		}
	}
	if c.DType != "" {
		_, hasTorch := raw["torch_dtype"]
		_, hasNew := raw["dtype"]
		if hasTorch || !hasNew {
			set("torch_dtype", c.DType)
		}
		if hasNew {
			set("dtype", c.DType)
		}
	}
	if fresh {
		slices.Sort(keys) // as transformers' sort_keys=True
	}
	return hfWriteObject(keys, raw)
}

// hfSetRopeTheta writes a changed rope_theta where the file kept it.
func (c *Config) hfSetRopeTheta(raw map[string]json.RawMessage, set func(string, any)) error {
	rp, ok := raw["rope_parameters"]
	if _, top := raw["rope_theta"]; top || !ok || string(rp) == "null" {
		set("rope_theta", c.RopeTheta)
		return nil
	}
	var block map[string]any
	if err := json.Unmarshal(rp, &block); err != nil {
		return fmt.Errorf("model: %s: rope_parameters: %v", c.source, err)
	}
	block["rope_theta"] = c.RopeTheta
	set("rope_parameters", block)
	return nil
}

// hfFields lists the keys Config owns: how to read each field and when a
// fresh config leaves the key out.
func (c *Config) hfFields() []struct {
	key  string
	get  func(*Config) any
	omit func(*Config) bool
} {
	never := func(*Config) bool { return false }
	type F = struct {
		key  string
		get  func(*Config) any
		omit func(*Config) bool
	}
	tokenID := func(id int) any {
		if id < 0 {
			return nil
		}
		return id
	}
	return []F{
		{"architectures", func(c *Config) any { return c.Architectures }, func(c *Config) bool { return c.Architectures == nil }},
		{"model_type", func(c *Config) any { return c.ModelType }, never},
		{"hidden_size", func(c *Config) any { return c.HiddenSize }, never},
		{"intermediate_size", func(c *Config) any { return c.IntermediateSize }, never},
		{"num_hidden_layers", func(c *Config) any { return c.NumHiddenLayers }, never},
		{"num_attention_heads", func(c *Config) any { return c.NumAttentionHeads }, never},
		{"num_key_value_heads", func(c *Config) any { return c.NumKeyValueHeads }, never},
		{"head_dim", func(c *Config) any { return c.HeadDimOverride }, func(c *Config) bool { return c.HeadDimOverride == 0 }},
		{"vocab_size", func(c *Config) any { return c.VocabSize }, never},
		{"max_position_embeddings", func(c *Config) any { return c.MaxPositionEmbeddings }, never},
		{"rms_norm_eps", func(c *Config) any { return c.RMSNormEps }, never},
		{"rope_theta", func(c *Config) any { return c.RopeTheta }, never},
		{"hidden_act", func(c *Config) any { return c.HiddenAct }, never},
		{"attention_dropout", func(c *Config) any { return c.AttentionDropout }, never},
		{"initializer_range", func(c *Config) any { return c.InitializerRange }, never},
		{"bos_token_id", func(c *Config) any { return tokenID(c.BOSTokenID) }, never},
		{"eos_token_id", func(c *Config) any {
			if len(c.EOSTokenIDs) == 1 && !c.eosList {
				return c.EOSTokenIDs[0]
			}
			return c.EOSTokenIDs
		}, func(c *Config) bool { return c.EOSTokenIDs == nil }},
		{"pad_token_id", func(c *Config) any { return tokenID(c.PadTokenID) }, func(c *Config) bool { return c.PadTokenID < 0 }},
		{"tie_word_embeddings", func(c *Config) any { return c.TieWordEmbeddings }, never},
		{"use_sliding_window", func(c *Config) any { return c.UseSlidingWindow }, never},
		{"sliding_window", func(c *Config) any {
			if c.SlidingWindow <= 0 {
				return nil
			}
			return c.SlidingWindow
		}, never},
		{"max_window_layers", func(c *Config) any { return c.MaxWindowLayers }, never},
		{"layer_types", func(c *Config) any { return c.LayerTypes }, func(c *Config) bool { return c.LayerTypes == nil }},
		{"use_cache", func(c *Config) any { return c.UseCache }, never},
		{"transformers_version", func(c *Config) any { return c.TransformersVersion }, func(c *Config) bool { return c.TransformersVersion == "" }},
		{"attention_bias", func(c *Config) any { return c.AttentionBias }, func(c *Config) bool { return c.ModelType == "qwen2" }},
		{"mlp_bias", func(c *Config) any { return c.MLPBias }, func(c *Config) bool { return c.ModelType != "llama" }},
	}
}

// hfTokenIDs reads a token id field that may be null, an int or a list.
func hfTokenIDs(v json.RawMessage, source, key string) ([]int, bool, error) {
	if v == nil || string(v) == "null" {
		return nil, false, nil
	}
	var one int
	if err := json.Unmarshal(v, &one); err == nil {
		return []int{one}, false, nil
	}
	var list []int
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, false, fmt.Errorf("model: %s: field %s: %s is not an int or a list of ints", source, key, hfShort(v))
	}
	return list, true, nil
}

// hfReadObject splits a JSON object into its keys, in order, and raw
// values, rejecting duplicate keys (which Python would silently merge).
func hfReadObject(data []byte, source string) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return nil, nil, fmt.Errorf("model: %s: not a JSON object", source)
	}
	var keys []string
	raw := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("model: %s: %v", source, err)
		}
		key := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("model: %s: field %s: %v", source, key, err)
		}
		if _, dup := raw[key]; dup {
			return nil, nil, fmt.Errorf("model: %s: field %s appears twice", source, key)
		}
		keys = append(keys, key)
		raw[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("model: %s: %v", source, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, nil, fmt.Errorf("model: %s: data after the JSON object", source)
	}
	return keys, raw, nil
}

// hfWriteObject writes keys in order with two-space indentation and a final
// newline, the layout transformers uses; values keep their original text.
func hfWriteObject(keys []string, raw map[string]json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(raw[k])
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("model: writing config: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// hfShort quotes a raw JSON value for an error message, cut to 40 bytes.
func hfShort(v json.RawMessage) string {
	s := string(v)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// hfKind names the Go type a field decodes into, for error messages.
func hfKind(dst any) string {
	switch dst.(type) {
	case *int:
		return "integer"
	case *float64:
		return "number"
	case *bool:
		return "boolean"
	case *string:
		return "string"
	case *[]string:
		return "list of strings"
	}
	return "value"
}
