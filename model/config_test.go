package model

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The dimensions and parameter counts of formats.md §1.2, computed there
// from the configs independently of this code (3B and 7B also equal the
// published index total_size / 2).
func TestConfigQwen25Official(t *testing.T) {
	for _, c := range []struct {
		file                                string
		h, i, layers, heads, kv, hd, kvw, v int
		tied                                bool
		params                              int64
		tensors                             int
	}{
		{"config_qwen2.5-0.5b.json", 896, 4864, 24, 14, 2, 64, 128, 151936, true, 494_032_768, 290},
		{"config_qwen2.5-1.5b.json", 1536, 8960, 28, 12, 2, 128, 256, 151936, true, 1_543_714_304, 338},
		{"config_qwen2.5-3b.json", 2048, 11008, 36, 16, 2, 128, 256, 151936, true, 3_085_938_688, 434},
		{"config_qwen2.5-7b.json", 3584, 18944, 28, 28, 4, 128, 512, 152064, false, 7_615_616_512, 339},
	} {
		cfg, err := LoadConfig(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got := []int{cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads,
			cfg.NumKeyValueHeads, cfg.HeadDim(), cfg.KVDim(), cfg.VocabSize}
		want := []int{c.h, c.i, c.layers, c.heads, c.kv, c.hd, c.kvw, c.v}
		if !reflect.DeepEqual(got, want) || cfg.TieWordEmbeddings != c.tied {
			t.Errorf("%s: dims %v tied %v, want %v tied %v", c.file, got, cfg.TieWordEmbeddings, want, c.tied)
		}
		if p := cfg.ParamCount(); p != c.params {
			t.Errorf("%s: ParamCount %d, want %d", c.file, p, c.params)
		}
		if n := len(ExpectedTensors(cfg)); n != c.tensors {
			t.Errorf("%s: %d tensors, want %d", c.file, n, c.tensors)
		}
		if !cfg.QKVBias() || cfg.RopeTheta != 1e6 || cfg.RMSNormEps != 1e-6 || cfg.DType != "bfloat16" ||
			!reflect.DeepEqual(cfg.EOSTokenIDs, []int{151645}) || cfg.BOSTokenID != 151643 || cfg.PadTokenID != -1 {
			t.Errorf("%s: scalars %+v", c.file, cfg)
		}
	}
}

func TestConfigTransformersVariants(t *testing.T) {
	c455, err := LoadConfig("testdata/config_qwen2.5-0.5b-tf4.55.json")
	if err != nil {
		t.Fatal(err)
	}
	if c455.DType != "float32" || c455.SlidingWindow != 0 || c455.PadTokenID != 151643 || len(c455.LayerTypes) != 24 {
		t.Errorf("4.55 config: %+v", c455)
	}
	c5, err := LoadConfig("testdata/config_qwen2.5-0.5b-tf5.json")
	if err != nil {
		t.Fatal(err)
	}
	if c5.RopeTheta != 1e6 || c5.DType != "bfloat16" || !reflect.DeepEqual(c5.EOSTokenIDs, []int{151645, 151643}) {
		t.Errorf("5.x config: rope_theta %g dtype %q eos %v", c5.RopeTheta, c5.DType, c5.EOSTokenIDs)
	}
	if c455.ParamCount() != 494_032_768 || c5.ParamCount() != 494_032_768 {
		t.Errorf("variants change the parameter count: %d, %d", c455.ParamCount(), c5.ParamCount())
	}
}

// hfEdit returns the 0.5B config with some keys replaced (nil deletes).
func hfEdit(t *testing.T, edits map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/config_qwen2.5-0.5b.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	for k, v := range edits {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return out
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name  string
		edits map[string]any
		want  string
	}{
		{"yarn", map[string]any{"rope_scaling": map[string]any{"type": "yarn", "factor": 4.0}}, `rope_scaling type "yarn"`},
		{"linear rope_type", map[string]any{"rope_scaling": map[string]any{"rope_type": "linear"}}, `"linear" is not supported`},
		{"rope_parameters llama3", map[string]any{"rope_parameters": map[string]any{"rope_type": "llama3", "rope_theta": 5e5}}, `"llama3"`},
		{"rope_theta disagrees", map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 5e5}}, "disagrees"},
		{"sliding in use", map[string]any{"use_sliding_window": true}, "sliding-window attention is not supported"},
		{"sliding layer type", map[string]any{"layer_types": append(hfRepeat("full_attention", 23), "sliding_attention")}, "layer_types[23]"},
		{"layer_types length", map[string]any{"layer_types": hfRepeat("full_attention", 3)}, "3 entries for 24 layers"},
		{"gelu", map[string]any{"hidden_act": "gelu"}, `hidden_act "gelu"`},
		{"missing hidden_size", map[string]any{"hidden_size": nil}, "hidden_size is missing"},
		{"string size", map[string]any{"hidden_size": "896"}, `field hidden_size: "\"896\"" is not a valid integer`},
		{"eos string", map[string]any{"eos_token_id": "x"}, "eos_token_id"},
		{"mistral", map[string]any{"model_type": "mistral"}, `model_type "mistral"`},
		{"architecture", map[string]any{"architectures": []string{"Qwen2ForSequenceClassification"}}, "want Qwen2ForCausalLM"},
		{"kv heads", map[string]any{"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"},
		{"heads", map[string]any{"num_attention_heads": 15}, "not a multiple of num_attention_heads 15"},
		{"dtype", map[string]any{"torch_dtype": "float64"}, `dtype "float64"`},
		{"dropout", map[string]any{"attention_dropout": 0.1}, "attention_dropout"},
		{"huge", map[string]any{"num_hidden_layers": 232768}, "implausibly large"},
		{"llama o bias", map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"}, "attention_bias": true}, "o_proj bias"},
	}
	for _, c := range cases {
		_, err := ParseConfig(hfEdit(t, c.edits), "bad/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "model: bad/config.json: ") {
			t.Errorf("%s: got %v, want an error naming the file and containing %q", c.name, err, c.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":1,"a":2}`, `{"hidden_size":1} x`, ``} {
		if _, err := ParseConfig([]byte(bad), "x.json"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := LoadConfig("testdata/no-such-config.json"); err == nil || !strings.Contains(err.Error(), "no-such-config.json") {
		t.Errorf("missing file: %v", err)
	}
}

func hfRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestConfigAccepted(t *testing.T) {
	for name, edits := range map[string]map[string]any{
		"rope_scaling null":    {"rope_scaling": nil},
		"rope default":         {"rope_scaling": map[string]any{"rope_type": "default"}},
		"swish":                {"hidden_act": "swish"},
		"sliding off by layer": {"use_sliding_window": true, "max_window_layers": 24},
		"head_dim":             {"head_dim": 128},
		"no kv heads":          {"num_key_value_heads": nil, "num_attention_heads": 14},
	} {
		cfg, err := ParseConfig(hfEdit(t, edits), name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		switch name {
		case "head_dim":
			if cfg.HeadDim() != 128 || ExpectedTensors(cfg)[2].Shape[0] != 14*128 || cfg.KVDim() != 256 {
				t.Errorf("head_dim 128: HeadDim %d, q_proj %v", cfg.HeadDim(), ExpectedTensors(cfg)[2].Shape)
			}
		case "no kv heads":
			if cfg.NumKeyValueHeads != 14 {
				t.Errorf("kv heads default %d, want num_attention_heads", cfg.NumKeyValueHeads)
			}
		}
	}
}

func TestConfigLlama(t *testing.T) {
	cfg, err := ParseConfig(hfEdit(t, map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"},
		"attention_bias": false, "tie_word_embeddings": false}), "llama.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QKVBias() {
		t.Error("llama has q/k/v bias")
	}
	for _, e := range ExpectedTensors(cfg) {
		if strings.HasSuffix(e.Name, ".bias") {
			t.Errorf("llama expects %s", e.Name)
		}
	}
	// 0.5B less the q/k/v biases (24 * (896+128+128)), plus an untied head.
	if want := int64(494_032_768 - 24*(896+128+128) + 151936*896); cfg.ParamCount() != want {
		t.Errorf("llama params %d, want %d", cfg.ParamCount(), want)
	}
	out, err := cfg.JSON()
	if err != nil || !bytes.Contains(out, []byte(`"attention_bias": false`)) {
		t.Errorf("llama JSON lost attention_bias: %s %v", out, err)
	}
}

// Unchanged configs write back byte for byte; a dtype change touches only
// the dtype keys, and the keys a file did not have stay absent.
func TestConfigJSONKeepsUserKeys(t *testing.T) {
	files, _ := filepath.Glob("testdata/config_qwen2.5-*b*.json")
	if len(files) != 6 {
		t.Fatalf("found %d config fixtures", len(files))
	}
	for _, f := range files {
		orig, _ := os.ReadFile(f)
		cfg, err := LoadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cfg.JSON()
		if err != nil || !bytes.Equal(out, orig) {
			t.Errorf("%s: JSON() changed an unchanged config:\n%s", f, out)
		}
		saved := *cfg
		saved.DType = "float16"
		out, _ = saved.JSON()
		var before, after map[string]any
		json.Unmarshal(orig, &before)
		json.Unmarshal(out, &after)
		for k, v := range before {
			if k == "dtype" || k == "torch_dtype" {
				if after[k] != "float16" {
					t.Errorf("%s: %s = %v after save as float16", f, k, after[k])
				}
				continue
			}
			if !reflect.DeepEqual(after[k], v) {
				t.Errorf("%s: key %s changed: %v -> %v", f, k, v, after[k])
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok && k != "torch_dtype" {
				t.Errorf("%s: key %s added", f, k)
			}
		}
		if _, had := before["torch_dtype"]; !had && after["torch_dtype"] != nil {
			t.Errorf("%s: torch_dtype added to a file that uses dtype", f)
		}
	}
	// A changed field is written; the 5.x file keeps rope_theta inside rope_parameters.
	cfg, _ := LoadConfig("testdata/config_qwen2.5-0.5b-tf5.json")
	cfg.VocabSize, cfg.RopeTheta, cfg.PadTokenID = 1000, 5e5, -1
	out, _ := cfg.JSON()
	back, err := ParseConfig(out, "rewritten")
	if err != nil {
		t.Fatal(err)
	}
	if back.VocabSize != 1000 || back.RopeTheta != 5e5 || back.PadTokenID != -1 || bytes.Contains(out, []byte(`"rope_theta": 5`)) && !bytes.Contains(out, []byte("rope_parameters")) {
		t.Errorf("changed fields not written: %s", out)
	}
	if strings.Count(string(out), "rope_theta") != 1 {
		t.Errorf("rope_theta written twice:\n%s", out)
	}
}

// A config built in code renders every key and parses back to itself.
func TestConfigJSONFresh(t *testing.T) {
	cfg := &Config{Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2", HiddenSize: 64, IntermediateSize: 96,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, VocabSize: 100, MaxPositionEmbeddings: 128,
		RMSNormEps: 1e-6, RopeTheta: 1e6, HiddenAct: "silu", InitializerRange: 0.02, BOSTokenID: 1,
		EOSTokenIDs: []int{2, 3}, PadTokenID: -1, TieWordEmbeddings: true, DType: "bfloat16", UseCache: true}
	out, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(out, "fresh")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	back.source, back.keys, back.raw, back.parsed, back.eosList = "", nil, nil, nil, false
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("fresh config changed in JSON:\n%+v\n%+v\n%s", back, cfg, out)
	}
	if !strings.HasPrefix(string(out), "{\n  \"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ],\n  \"attention_dropout\": 0,") {
		t.Errorf("not sorted indent-2 JSON:\n%s", out)
	}
}

func TestConfigGeneration(t *testing.T) {
	g, err := LoadGenerationConfig("testdata/config_qwen2.5-generation.json")
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultGenerationConfig()
	if g.DoSample != d.DoSample || g.Temperature != d.Temperature || g.TopP != d.TopP || g.TopK != d.TopK ||
		g.RepetitionPenalty != d.RepetitionPenalty || !reflect.DeepEqual(g.EOSTokenIDs, d.EOSTokenIDs) ||
		g.BOSTokenID != d.BOSTokenID || g.PadTokenID != d.PadTokenID {
		t.Errorf("Qwen2.5 file %+v differs from the defaults %+v", g, d)
	}
	orig, _ := os.ReadFile("testdata/config_qwen2.5-generation.json")
	if out, _ := g.JSON(); !bytes.Equal(out, orig) {
		t.Errorf("unchanged generation config rewritten:\n%s", out)
	}
	g.Temperature = 1.0
	out, _ := g.JSON()
	if !bytes.Contains(out, []byte(`"temperature": 1,`)) || !bytes.Contains(out, []byte(`"top_k": 20`)) {
		t.Errorf("temperature change:\n%s", out)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"int eos":  `{"eos_token_id": 7}`,
		"bad topp": `{"top_p": 2}`,
		"bad type": `{"temperature": "hot"}`,
	} {
		p := filepath.Join(dir, "g.json")
		os.WriteFile(p, []byte(body), 0o644)
		g, err := LoadGenerationConfig(p)
		switch name {
		case "int eos":
			if err != nil || !reflect.DeepEqual(g.EOSTokenIDs, []int{7}) || g.TopK != 50 || g.DoSample {
				t.Errorf("%s: %+v %v", name, g, err)
			}
			if out, _ := g.JSON(); !bytes.Equal(out, []byte("{\n  \"eos_token_id\": 7\n}\n")) {
				t.Errorf("%s rewritten as %s", name, out)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// FuzzConfigParse: no input panics, and an accepted config survives JSON().
func FuzzConfigParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/config_*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"llama","hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":4}`))
	f.Add([]byte(`{"model_type":"qwen2","hidden_size":896,"intermediate_size":48643276821,"num_hidden_layers":232768,"num_attention_heads":14,"vocab_size":151936}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "model: fuzz") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		out, err := cfg.JSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(out, "fuzz")
		if err != nil {
			t.Fatalf("rewritten config rejected: %v\n%s", err, out)
		}
		if back.ParamCount() != cfg.ParamCount() || back.RopeTheta != cfg.RopeTheta || !reflect.DeepEqual(back.EOSTokenIDs, cfg.EOSTokenIDs) {
			t.Fatalf("rewrite changed the config")
		}
	})
}
