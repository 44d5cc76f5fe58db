package model

import (
	"fmt"
	"testing"
)

// benchConfig builds a Qwen2 config of the given shape for benchmarks.
func benchConfig(b testing.TB, C, L, NH, KVH, I, V int) *Config {
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": %d,
		"intermediate_size": %d, "num_hidden_layers": %d, "num_attention_heads": %d,
		"num_key_value_heads": %d, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"max_position_embeddings": 32768, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`, C, I, L, NH, KVH, V)
	cfg, err := ParseConfig([]byte(raw), "bench config.json")
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkTrainStep times forward + backward of a 27M-parameter Qwen2 on
// 4 packed sequences of 512 tokens (cmd benchmarks/cpu reports it beside
// PyTorch; this is the profiling entry point).
func BenchmarkTrainStep(b *testing.B) {
	m, err := New(benchConfig(b, 512, 8, 8, 2, 1408, 8192), NewCPU(), LMHeadOutput)
	if err != nil {
		b.Fatal(err)
	}
	m.InitRandom(1)
	benchTrainStep(b, m, 4, 512, 8192, 131, 7, true)
}

// benchTrainStep times forward + backward of m over seqs sequences of n
// tokens (token i of sequence s is (s·a + i·c) mod vocab), with d/dlogprob
// 1 and, with entropy, d/dentropy 1.
func benchTrainStep(b *testing.B, m *Model, seqs, n, vocab, a, c int, entropy bool) {
	batch := Batch{Seqs: []int32{0}}
	for s := 0; s < seqs; s++ {
		for i := 0; i < n; i++ {
			batch.Tokens = append(batch.Tokens, int32((s*a+i*c)%vocab))
		}
		batch.Seqs = append(batch.Seqs, int32(len(batch.Tokens)))
	}
	g := make([]float32, len(batch.Tokens))
	for i := range g {
		g[i] = 1
	}
	dEnt := g
	if !entropy {
		dEnt = nil
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Forward(batch, true); err != nil {
			b.Fatal(err)
		}
		if err := m.Backward(g, dEnt, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(batch.Tokens)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkDecodeStep times single-stream decoding of the 27M-parameter
// model through the KV cache (the profiling entry point of the decode
// section of cmd benchmarks/cpu).
func BenchmarkDecodeStep(b *testing.B) {
	m, err := New(benchConfig(b, 512, 8, 8, 2, 1408, 8192), NewCPU(), LMHeadOutput)
	if err != nil {
		b.Fatal(err)
	}
	m.InitRandom(1)
	c := m.NewKVCache(1, 4096)
	if _, err := m.Step(c, []Chunk{{Slot: 0, Tokens: make([]int32, 32)}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if c.Lens[0] >= 4000 {
			c.Lens[0] = 32
		}
		if _, err := m.Step(c, []Chunk{{Slot: 0, Tokens: []int32{int32(i % 8192)}}}); err != nil {
			b.Fatal(err)
		}
	}
}

// qwen05B returns a random-weight model of Qwen2.5-0.5B's shapes (hidden
// 896, 24 layers, 14 heads, 2 KV heads, MLP 4864, vocabulary 151,936).
func qwen05B(b *testing.B, frozen bool) *Model {
	m, err := NewWith(benchConfig(b, 896, 24, 14, 2, 4864, 151936), NewCPU(), LMHeadOutput, LoadOptions{Frozen: frozen})
	if err != nil {
		b.Fatal(err)
	}
	m.InitRandom(1)
	return m
}

// BenchmarkTrainStep05B times forward + backward of Qwen2.5-0.5B's shapes
// on 2 sequences of 320 tokens saving every layer and the logits, the
// update's micro-batch in benchmarks/cpu's step section (the profiling
// entry point: go test -run XXX -bench TrainStep05B -benchtime 1x
// -cpuprofile cpu.prof ./model).
func BenchmarkTrainStep05B(b *testing.B) {
	m := qwen05B(b, false)
	m.SaveBytes = 3 << 29 // 1.5 GiB: every layer (1.1 GiB) and the logits (0.36 GiB)
	benchTrainStep(b, m, 2, 320, 151936, 131, 7919, false)
}

// BenchmarkDecodeBatch05B times decode steps of 32 sequences at once
// through the KV cache on Qwen2.5-0.5B's shapes, sampling at temperature
// 1 (the rollout of benchmarks/cpu's step section): float32 weights, the
// bf16 rollout copy with bf16 products (rollout.dtype bfloat16), and a bf16
// copy whose products widen the weights to float32 (the frozen reference's
// storage), for CPUs whose bf16 dot products are no faster than FMA.
func BenchmarkDecodeBatch05B(b *testing.B) {
	m := qwen05B(b, true) // decoding needs no gradients
	dot, err := m.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true})
	if err != nil {
		b.Fatal(err)
	}
	widen, err := m.CloneWith(LoadOptions{Frozen: true, DType: "bfloat16"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *Model
	}{{"float32", m}, {"bf16-copy", dot}, {"bf16-widen", widen}} {
		b.Run(c.name, func(b *testing.B) { decodeBatch(b, c.m) })
	}
}

// decodeBatch times batch-32 decode steps of m with sampling.
func decodeBatch(b *testing.B, m *Model) {
	const slots = 32
	c := m.NewKVCache(slots, 320)
	defer c.Free(m.Dev)
	chunks := make([]Chunk, slots)
	for s := range chunks {
		chunks[s] = Chunk{Slot: s, Tokens: make([]int32, 8)} // short: a profile shows decoding, not the prefill
	}
	if _, err := m.Step(c, chunks); err != nil {
		b.Fatal(err)
	}
	samp := Sampling{Temperature: 1, TopP: 1, TopK: -1}
	seeds := make([]uint64, slots)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for s := range chunks {
			seeds[s] = uint64(i*slots + s)
			if c.Lens[s] >= 319 {
				c.Lens[s] = 8
			}
			chunks[s].Tokens = []int32{int32((i*31 + s) % 151936)}
		}
		if _, err := m.StepSample(c, chunks, samp, seeds, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(slots*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
