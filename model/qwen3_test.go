package model

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyQwen3Config is a small Qwen3 config whose head_dim (6) is not
// hidden/heads (4), so q is wider than the hidden size.
func tinyQwen3Config(t *testing.T) *Config {
	t.Helper()
	raw := `{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 16,
		"intermediate_size": 10, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 6,
		"num_key_value_heads": 2, "vocab_size": 17, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.3,
		"tie_word_embeddings": true, "attention_bias": false, "use_sliding_window": false,
		"sliding_window": null, "max_window_layers": 2, "torch_dtype": "bfloat16"}`
	cfg, err := ParseConfig([]byte(raw), "tiny qwen3 config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestQwen3Config reads Qwen3-4B's config.json and checks the shapes it
// implies: explicit head_dim, no q/k/v bias, q_norm and k_norm per layer,
// and transformers' parameter count of 4,022,468,096.
func TestQwen3Config(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "config_qwen3-4b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HeadDim() != 128 || cfg.KVDim() != 1024 || cfg.QKVBias() || !cfg.QKNorm() {
		t.Fatalf("head_dim %d, kv dim %d, bias %v, qk norm %v", cfg.HeadDim(), cfg.KVDim(), cfg.QKVBias(), cfg.QKNorm())
	}
	if n := cfg.ParamCount(); n != 4022468096 {
		t.Fatalf("ParamCount = %d, want 4022468096", n)
	}
	var names []string
	for _, s := range ExpectedTensors(cfg)[:12] {
		names = append(names, s.Name)
	}
	for _, want := range []string{"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight"} {
		if !slices.Contains(names, want) {
			t.Fatalf("ExpectedTensors lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "model.layers.0.self_attn.q_proj.bias") {
		t.Fatal("Qwen3 lists a q_proj bias")
	}
	raw, _ := cfg.JSON()
	if _, err := ParseConfig([]byte(replaceOnce(string(raw), `"attention_bias": false`, `"attention_bias": true`)), "bias.json"); err == nil {
		t.Fatal("Qwen3 with attention_bias true was accepted")
	}
	if _, err := ParseConfig([]byte(replaceOnce(string(raw), `"Qwen3ForCausalLM"`, `"Qwen2ForCausalLM"`)), "arch.json"); err == nil {
		t.Fatal("model_type qwen3 with Qwen2ForCausalLM was accepted")
	}
}

func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("replaceOnce: " + old + " not found")
	}
	return strings.Replace(s, old, new, 1)
}

// TestQwen3GradFiniteDifference checks the Qwen3 backward, q_norm and
// k_norm included, against central differences in float64, with and
// without recomputation.
func TestQwen3GradFiniteDifference(t *testing.T) {
	for _, recompute := range []bool{false, true} {
		m, err := New(tinyQwen3Config(t), NewCPU64(), LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.Recompute = recompute
		m.InitRandom(7)
		p := host64(m.Params)
		rng := rand.New(rand.NewPCG(4, 4))
		for i := range p { // norms away from their trivial init
			p[i] += 0.1 * rng.NormFloat64()
		}
		b := Batch{Tokens: []int32{3, 9, 1, 16, 0, 4, 4, 2}, Seqs: []int32{0, 3, 4, 8}}
		T := len(b.Tokens)
		r1, r2 := make([]float32, T), make([]float32, T)
		for i := range r1 {
			r1[i], r2[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		if _, err := m.Forward(b, true); err != nil {
			t.Fatal(err)
		}
		m.ZeroGrads()
		if err := m.Backward(r1, r2, nil); err != nil {
			t.Fatal(err)
		}
		g := append([]float64(nil), host64(m.Grads)...)
		for _, s := range m.specs {
			if s.Name == "model.layers.1.self_attn.k_norm.weight" && dotF(g[s.Off:s.Off+s.size()], g[s.Off:s.Off+s.size()]) == 0 {
				t.Fatal("k_norm gradient is zero")
			}
		}
		loss64 := func() float64 {
			a, err := m.forwardHidden(b, true)
			if err != nil {
				t.Fatal(err)
			}
			m.Dev.LMHead(a.logprob, a.entropy, a.lseV, nil, a.lnf, m.p.lmHead, a.targets, a.T, m.d.C, m.d.V)
			lp, en := host64(a.logprob), host64(a.entropy)
			var s float64
			for i := 0; i < T; i++ {
				s += float64(r1[i])*lp[i] + float64(r2[i])*en[i]
			}
			return s
		}
		fdCheck(t, "qwen3 params", p, loss64, g)
	}
}

// TestQwen3KVCacheMatchesFullForward decodes through the KV cache, whose
// step runs the per-head norms on its own activation arena, and compares
// with full forwards.
func TestQwen3KVCacheMatchesFullForward(t *testing.T) {
	cfg := tinyQwen3Config(t)
	m, err := New(cfg, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(11)
	c := m.NewKVCache(2, 16)
	seqs := [][]int32{{1, 2, 3, 4, 5}, {6, 7}}
	got, err := m.Step(c, []Chunk{{Slot: 0, Tokens: seqs[0]}, {Slot: 1, Tokens: seqs[1]}})
	if err != nil {
		t.Fatal(err)
	}
	V := cfg.VocabSize
	for step := 0; step < 3; step++ {
		for s, seq := range seqs {
			want, err := m.FullLogits(Batch{Tokens: seq, Seqs: []int32{0, int32(len(seq))}}, []int32{int32(len(seq) - 1)})
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(got[s*V:(s+1)*V], want); e > 1e-5 {
				t.Fatalf("step %d slot %d: cached logits differ from the full forward by %.3g", step, s, e)
			}
		}
		next := int32(8 + step)
		seqs[0], seqs[1] = append(seqs[0], next), append(seqs[1], next+3)
		if got, err = m.Step(c, []Chunk{{Slot: 0, Tokens: []int32{next}}, {Slot: 1, Tokens: []int32{next + 3}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQwen3SaveLoad saves a Qwen3 model, checks the Hugging Face names of
// the per-head norms in the file, and loads it back bit for bit.
func TestQwen3SaveLoad(t *testing.T) {
	m, err := New(tinyQwen3Config(t), NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(5)
	host := make([]float32, m.Params.Len())
	m.Dev.Download(host, m.Params)
	for i := range host {
		host[i] += float32(i%7) * 0.01 // norms differ from ones
	}
	m.Dev.Upload(m.Params, host)
	dir := filepath.Join(t.TempDir(), "out")
	if err := m.Save(dir, nil, SaveOptions{DType: "float32"}); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"} {
		if shape, ok := w.Shape(name); !ok || !slices.Equal(shape, []int{6}) {
			t.Fatalf("%s: shape %v, stored %v", name, shape, ok)
		}
	}
	w.Close()
	m2, err := Load(dir, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, m2.Params.Len())
	m2.Dev.Download(got, m2.Params)
	for i := range host {
		if math.Float32bits(host[i]) != math.Float32bits(got[i]) {
			t.Fatalf("parameter %d changed in the round trip: %v -> %v", i, host[i], got[i])
		}
	}
}
