package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model/safetensors"
)

// goldenCase is one PyTorch fixture made by testdata/golden/make_golden.py.
type goldenCase struct {
	name   string
	tokens []int32
	seqs   []int32
	a, b   []float32 // L = Σ a·logprob + Σ b·entropy
}

func loadGoldenCase(t *testing.T, name string) goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", name+".inputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Tokens  []int32   `json:"tokens"`
		SeqLens []int32   `json:"seq_lens"`
		A       []float32 `json:"a"`
		B       []float32 `json:"b"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	seqs := []int32{0}
	for _, n := range in.SeqLens {
		seqs = append(seqs, seqs[len(seqs)-1]+n)
	}
	return goldenCase{name: name, tokens: in.Tokens, seqs: seqs, a: in.A, b: in.B}
}

// relErr is max|got − want| / max|want|: the tolerance of DESIGN.md
// ("relative error ≤ 1e-4") applied to a whole tensor.
func relErr(got, want []float32) float64 {
	var diff, scale float64
	for i := range want {
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return diff / math.Max(scale, 1e-30)
}

func readGolden(t *testing.T, f *safetensors.File, name string) []float32 {
	t.Helper()
	info, ok := f.Info(name)
	if !ok {
		t.Fatalf("golden tensor %s missing", name)
	}
	v := make([]float32, info.NumElements())
	if err := f.ReadF32(name, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGoldenPyTorch loads each fixture folder through the real loader and
// compares logits, logprob, entropy and every parameter's gradient with
// PyTorch (float64 reference) within 1e-4 relative, with and without
// activation recomputation.
func TestGoldenPyTorch(t *testing.T) {
	for _, name := range []string{"qwen2_tied", "qwen2_untied", "llama_untied", "qwen3_tied"} {
		for _, recompute := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				gc := loadGoldenCase(t, name)
				m, err := Load(filepath.Join("testdata", "golden", name), NewCPU(), LMHeadOutput)
				if err != nil {
					t.Fatal(err)
				}
				m.Recompute = recompute
				gf, err := safetensors.Open(filepath.Join("testdata", "golden", name+".golden.safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				defer gf.Close()
				b := Batch{Tokens: gc.tokens, Seqs: gc.seqs}
				out, err := m.Forward(b, true)
				if err != nil {
					t.Fatal(err)
				}
				check := func(what string, got, want []float32) {
					t.Helper()
					if e := relErr(got, want); e > 1e-4 || math.IsNaN(e) {
						t.Errorf("%s (recompute=%v): relative error %.3g > 1e-4", what, recompute, e)
					}
				}
				check("logprob", out.LogProb, readGolden(t, gf, "logprob"))
				check("entropy", out.Entropy, readGolden(t, gf, "entropy"))
				m.ZeroGrads()
				if err := m.Backward(gc.a, gc.b, nil); err != nil {
					t.Fatal(err)
				}
				grads := make([]float32, m.Grads.Len())
				m.Dev.Download(grads, m.Grads)
				for _, s := range m.specs {
					check("grad "+s.Name, grads[s.Off:s.Off+s.size()], readGolden(t, gf, "grad."+s.Name))
				}
				rows := make([]int32, len(gc.tokens))
				for i := range rows {
					rows[i] = int32(i)
				}
				logits, err := m.FullLogits(b, rows)
				if err != nil {
					t.Fatal(err)
				}
				check("logits", logits, readGolden(t, gf, "logits"))
			})
		}
	}
}

// tinyConfig is a small Qwen2 config for tests that need no fixture.
func tinyConfig(t *testing.T, tied bool) *Config {
	t.Helper()
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 12,
		"intermediate_size": 10, "num_hidden_layers": 2, "num_attention_heads": 3,
		"num_key_value_heads": 1, "vocab_size": 17, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.3,
		"tie_word_embeddings": ` + map[bool]string{true: "true", false: "false"}[tied] + `,
		"use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := ParseConfig([]byte(raw), "tiny config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestModelGradFiniteDifference checks the whole model's backward against
// central differences in float64, for a policy and for a critic.
func TestModelGradFiniteDifference(t *testing.T) {
	for _, head := range []Head{LMHeadOutput, ValueHeadOutput} {
		cfg := tinyConfig(t, head == LMHeadOutput)
		dev := NewCPU64()
		m, err := New(cfg, dev, head)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(7)
		p := host64(m.Params)
		rng := rand.New(rand.NewPCG(3, 3))
		for i := range p { // biases and norms away from their trivial init
			p[i] += 0.05 * rng.NormFloat64()
		}
		b := Batch{Tokens: []int32{3, 9, 1, 16, 0, 4, 4, 2}, Seqs: []int32{0, 3, 4, 8}}
		T := len(b.Tokens)
		r1, r2 := make([]float32, T), make([]float32, T)
		for i := range r1 {
			r1[i], r2[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		loss := func() float64 {
			out, err := m.Forward(b, true)
			if err != nil {
				t.Fatal(err)
			}
			var s float64
			for i := 0; i < T; i++ {
				if head == LMHeadOutput {
					s += float64(r1[i])*float64(out.LogProb[i]) + float64(r2[i])*float64(out.Entropy[i])
				} else {
					s += float64(r1[i]) * float64(out.Values[i])
				}
			}
			return s
		}
		loss()
		m.ZeroGrads()
		if head == LMHeadOutput {
			err = m.Backward(r1, r2, nil)
		} else {
			err = m.Backward(nil, nil, r1)
		}
		if err != nil {
			t.Fatal(err)
		}
		g := append([]float64(nil), host64(m.Grads)...)
		// Forward downloads float32 outputs; at this scale that rounding is
		// far above float64's, so compare through a float64 loss instead.
		loss64 := func() float64 {
			a, err := m.forwardHidden(b, true)
			if err != nil {
				t.Fatal(err)
			}
			d := m.d
			var s float64
			if head == LMHeadOutput {
				m.Dev.LMHead(a.logprob, a.entropy, a.lseV, nil, a.lnf, m.p.lmHead, a.targets, a.T, d.C, d.V)
				lp, en := host64(a.logprob), host64(a.entropy)
				for i := 0; i < T; i++ {
					s += float64(r1[i])*lp[i] + float64(r2[i])*en[i]
				}
			} else {
				m.Dev.Gemm(false, true, a.T, 1, d.C, 1, a.lnf, d.C, m.p.vw, d.C, 0, a.values, 1)
				m.Dev.AddBias(a.values, 1, m.p.vb, a.T, 1)
				v := host64(a.values)
				for i := 0; i < T; i++ {
					s += float64(r1[i]) * v[i]
				}
			}
			return s
		}
		fdCheck(t, map[Head]string{LMHeadOutput: "policy", ValueHeadOutput: "critic"}[head]+" params", p, loss64, g)
	}
}

// TestKVCacheMatchesFullForward prefills prompts of different lengths,
// decodes token by token for a batch of slots, and compares each step's
// logits with a full forward over the same prefix.
func TestKVCacheMatchesFullForward(t *testing.T) {
	cfg := tinyConfig(t, true)
	m, err := New(cfg, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(11)
	prompts := [][]int32{{1, 2, 3, 4, 5}, {6}, {7, 8, 9}}
	cont := [][]int32{{10, 11, 12}, {13, 14, 15}, {16, 0, 1}}
	c := m.NewKVCache(4, 16)
	var chunks []Chunk
	for s, p := range prompts {
		chunks = append(chunks, Chunk{Slot: s + 1, Tokens: p}) // slot 0 stays unused
	}
	got, err := m.Step(c, chunks)
	if err != nil {
		t.Fatal(err)
	}
	seqsSoFar := make([][]int32, len(prompts))
	for s := range prompts {
		seqsSoFar[s] = append([]int32(nil), prompts[s]...)
	}
	V := cfg.VocabSize
	for step := 0; ; step++ {
		for s := range prompts {
			seq := seqsSoFar[s]
			want, err := m.FullLogits(Batch{Tokens: seq, Seqs: []int32{0, int32(len(seq))}}, []int32{int32(len(seq) - 1)})
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(got[s*V:(s+1)*V], want); e > 1e-5 {
				t.Fatalf("step %d slot %d: cached logits differ from the full forward by %.3g", step, s, e)
			}
		}
		if step == len(cont[0]) {
			break
		}
		chunks = chunks[:0]
		for s := range prompts {
			chunks = append(chunks, Chunk{Slot: s + 1, Tokens: []int32{cont[s][step]}})
			seqsSoFar[s] = append(seqsSoFar[s], cont[s][step])
		}
		if got, err = m.Step(c, chunks); err != nil {
			t.Fatal(err)
		}
	}
	// A copied slot continues exactly as its source.
	c.CopySlot(m.Dev, 0, 1)
	a, _ := m.Step(c, []Chunk{{Slot: 0, Tokens: []int32{3}}, {Slot: 1, Tokens: []int32{3}}})
	if e := relErr(a[:V], a[V:]); e != 0 {
		t.Fatalf("copied slot diverges from its source by %.3g", e)
	}
	if _, err := m.Step(c, []Chunk{{Slot: 2, Tokens: make([]int32, 16)}}); err == nil {
		t.Fatal("a chunk past the cache length was accepted")
	}
}

// TestSaveLoadBitExact saves a model, loads it back and compares every
// parameter bit for bit, tied and untied.
func TestSaveLoadBitExact(t *testing.T) {
	for _, tied := range []bool{true, false} {
		cfg := tinyConfig(t, tied)
		m, err := New(cfg, NewCPU(), LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(5)
		dir := filepath.Join(t.TempDir(), "out")
		if err := m.Save(dir, nil, SaveOptions{DType: "float32"}); err != nil {
			t.Fatal(err)
		}
		w, err := OpenWeights(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, hasHead := w.Shape("lm_head.weight")
		w.Close()
		if hasHead == tied {
			t.Fatalf("tied=%v: lm_head.weight stored = %v", tied, hasHead)
		}
		m2, err := Load(dir, NewCPU(), LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		a, b := make([]float32, m.Params.Len()), make([]float32, m2.Params.Len())
		m.Dev.Download(a, m.Params)
		m2.Dev.Download(b, m2.Params)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("tied=%v: parameter %d changed in the round trip: %v -> %v", tied, i, a[i], b[i])
			}
		}
	}
}
