package cpu

import (
	"testing"

	"github.com/r1go/r1go/model"
)

// tinyConfig is a two-layer Qwen2 small enough for whole-model tests of
// the device's ops (model's tests have the same one).
func tinyConfig(t testing.TB, tied bool) *model.Config {
	t.Helper()
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 12,
		"intermediate_size": 10, "num_hidden_layers": 2, "num_attention_heads": 3,
		"num_key_value_heads": 1, "vocab_size": 17, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.3,
		"tie_word_embeddings": ` + map[bool]string{true: "true", false: "false"}[tied] + `,
		"use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "tiny config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// qwen05B returns a random-weight model of Qwen2.5-0.5B's shapes (hidden
// 896, 24 layers, 14 heads, 2 KV heads, MLP 4864, vocabulary 151,936) on
// this device, as model's benchmarks build it.
func qwen05B(b *testing.B, frozen bool) *model.Model {
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
		"intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
		"num_key_value_heads": 2, "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"max_position_embeddings": 32768, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "bench config.json")
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.NewWith(cfg, New(), model.LMHeadOutput, model.LoadOptions{Frozen: frozen})
	if err != nil {
		b.Fatal(err)
	}
	m.InitRandom(1)
	return m
}
