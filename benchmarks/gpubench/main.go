// Command gpubench is r1go's side of the GPU speed table that
// benchmarks/gpu/transformers_bench.py measures for transformers: the same
// model shapes, token counts, batches and prompt lengths, on the CUDA
// device in mixed precision as train runs it (bf16 compute copies of fp32
// master weights, fp32 AdamW state, bf16 KV cache, device sampling and
// graph-replayed decode steps). It writes the JSON keys the table pairs
// (benchmarks/gpu/README.md) and prints each figure as it goes.
//
//	train   forward + backward + AdamW over 4096 tokens: one row, and
//	        4 × 1024 packed (step_s, packed4_step_s; median of repeats)
//	decode  greedy decode steps through model.Decoder: batch 1 after a
//	        16-token prompt (128 steps), batch 256 after 2048-token prompts
//	        (32 steps); the prefill is left out, as the table's
//	        generate(n+1) − generate(1) leaves it out
//	rl      one GRPO-shaped step of the 0.5B model: 32 prompts × 8
//	        samples, 256 prompt + 256 sampled tokens (temperature 1), old
//	        and reference log-probabilities (the reference a frozen bf16
//	        clone), one update (PPO-clip gradient, one AdamW step)
//
// Usage, on the GPU machine (built here with CGO_ENABLED=0 and carried):
//
//	gpubench -json r1go_bench.json [-sections train,decode,rl] [-shapes 0.5B,1.5B]
//
// Timing is by the host clock around work followed by a device Sync, so
// each figure includes the launch and host overheads a training run pays.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
)

// shape is a Qwen2.5 configuration (the tied 0.5B and 1.5B models of the
// transformers side, vocabulary 151,936); "smoke" is a tiny one for -smoke.
type shape struct {
	layers, hidden, inter, heads, kv, vocab int
}

var shapes = map[string]shape{
	"0.5B":  {24, 896, 4864, 14, 2, 151936},
	"1.5B":  {28, 1536, 8960, 12, 2, 151936},
	"smoke": {2, 64, 128, 4, 2, 512},
}

// keepLayers raises the models' saved-layer bound (model.Model.SaveBytes)
// past every micro-batch here: on an H200 cmd/train's plan keeps the
// layers of these shapes (plan.KeepLayers), so the backward runs no
// second forward.
var keepLayers = true

// The sizes of the table; -smoke shrinks them to check the program on the
// CUDA emulator in seconds.
var (
	trainTokens = 4096
	decodeCases = []struct {
		key                  string
		batch, prompt, steps int
	}{{"b1", 1, 16, 128}, {"b256", 256, 2048, 32}}
)

// config is the shape's config.json as Qwen2.5's folders write it.
func config(s shape) (*model.Config, error) {
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": %d,
		"hidden_size": %d, "intermediate_size": %d, "num_hidden_layers": %d, "num_attention_heads": %d,
		"num_key_value_heads": %d, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true,
		"max_position_embeddings": 32768, "torch_dtype": "bfloat16"}`, s.vocab, s.hidden, s.inter, s.layers, s.heads, s.kv)
	return model.ParseConfig([]byte(raw), "gpubench shape")
}

// useSmokeSizes shrinks every section to seconds on the CUDA emulator.
func useSmokeSizes() {
	trainTokens = 256
	decodeCases[0].steps = 8
	decodeCases[1].batch, decodeCases[1].prompt, decodeCases[1].steps = 8, 64, 4
	rlPrompts, rlSamples, rlPromptLen, rlResp, rlMicroTokens = 2, 4, 16, 16, 64
}

func main() {
	out := flag.String("json", "r1go_bench.json", "where the results go (rewritten after every section)")
	sections := flag.String("sections", "train,decode,rl", "comma-separated sections")
	only := flag.String("shapes", "0.5B,1.5B", "model shapes of train and decode")
	reps := flag.Int("reps", 5, "timed repeats of a training step (median)")
	smoke := flag.Bool("smoke", false, "tiny shapes and sizes (the emulator's check of this program)")
	flag.BoolVar(&keepLayers, "keep-layers", true, "training forwards keep every layer's activations, as train chooses on a GPU with room (plan.KeepLayers); false: the automatic 1 GiB bound, recomputing")
	flag.Parse()
	if *smoke {
		*only = "smoke"
		useSmokeSizes()
	}

	res := map[string]map[string]any{}
	save := func() {
		raw, _ := json.MarshalIndent(res, "", " ")
		if err := os.WriteFile(*out, raw, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	names := strings.Split(*only, ",")
	slices.Sort(names)
	failed := false
	for _, sec := range strings.Split(*sections, ",") {
		for _, name := range names {
			if sec == "rl" && name == "1.5B" {
				continue
			}
			s, ok := shapes[name]
			if !ok {
				fmt.Fprintf(os.Stderr, "gpubench: unknown shape %q (0.5B, 1.5B or smoke)\n", name)
				os.Exit(2)
			}
			start := time.Now()
			r, err := run(sec, s, *reps)
			if err != nil {
				fmt.Fprintf(os.Stderr, "gpubench: %s %s: %v\n", sec, name, err)
				if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
					os.Exit(2)
				}
				failed = true
				continue
			}
			if res[sec] == nil {
				res[sec] = map[string]any{}
			}
			res[sec][name] = r
			fmt.Printf("section %s %s: %.1f s\n", sec, name, time.Since(start).Seconds())
			save()
		}
	}
	if failed {
		os.Exit(1)
	}
}

// run opens a fresh device for one section and shape, so that each starts
// with the card's memory free (Close releases every allocation).
func run(sec string, s shape, reps int) (r map[string]any, err error) {
	gpu, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	defer gpu.Close()
	defer func() { // the device panics on driver errors
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	cfg, err := config(s)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, gpu, model.LMHeadOutput)
	if err != nil {
		return nil, err
	}
	m.InitRandom(1)
	gpu.UseBF16(m.Params)
	if keepLayers {
		m.SaveBytes = 1 << 50
	}
	switch sec {
	case "train":
		return trainStep(m, reps)
	case "decode":
		return decode(m)
	case "rl":
		return rlStep(m)
	}
	return nil, fmt.Errorf("unknown section %q (train, decode or rl)", sec)
}

// randomTokens are n ids drawn uniformly from a vocabulary of V.
func randomTokens(rng *rand.Rand, n, V int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(V))
	}
	return t
}

// optimizer is AdamW's fp32 state for m's parameters.
type optimizer struct {
	m1, m2 model.Buffer
	step   int
}

func newOptimizer(m *model.Model) *optimizer {
	return &optimizer{m1: m.Dev.Alloc(m.NumParams()), m2: m.Dev.Alloc(m.NumParams())}
}

func (o *optimizer) apply(m *model.Model, lr float32) {
	o.step++
	m.Dev.AdamW(m.Params, m.Grads, o.m1, o.m2,
		model.AdamWParams{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: o.step, GradScale: 1})
}

// timed runs f and waits for the device.
func timed(dev model.Device, f func() error) (float64, error) {
	start := time.Now()
	if err := f(); err != nil {
		return 0, err
	}
	if err := dev.Sync(); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// trainStep times forward + backward + AdamW of the mean token loss over
// 4096 tokens, as one sequence and as four packed ones.
func trainStep(m *model.Model, reps int) (map[string]any, error) {
	T := trainTokens
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := randomTokens(rng, T, m.Config.VocabSize)
	opt := newOptimizer(m)
	dlp := make([]float32, T)
	for i := range dlp {
		dlp[i] = -1 / float32(T)
	}
	step := func(seqs []int32) func() error {
		b := model.Batch{Tokens: tokens, Seqs: seqs}
		return func() error {
			m.ZeroGrads()
			if _, err := m.Forward(b, true); err != nil {
				return err
			}
			if err := m.Backward(dlp, nil, nil); err != nil {
				return err
			}
			opt.apply(m, 1e-5)
			return nil
		}
	}
	row := map[string]any{"tokens": T, "params": m.NumParams(), "recompute": m.Recompute, "save_bytes": m.SaveBytes}
	for _, c := range []struct {
		key  string
		seqs []int32
	}{{"step_s", []int32{0, int32(T)}}, {"packed4_step_s", []int32{0, int32(T / 4), int32(T / 2), int32(3 * T / 4), int32(T)}}} {
		f := step(c.seqs)
		var ts []float64
		for i := 0; i < reps+2; i++ {
			t, err := timed(m.Dev, f)
			if err != nil {
				return nil, err
			}
			if i >= 2 { // warm-up: kernels load, arenas grow
				ts = append(ts, t)
			}
		}
		row[c.key] = median(ts)
		// One more step with the device drained between phases: where
		// the step's time goes, for the profile a GPU session starts from.
		b := model.Batch{Tokens: tokens, Seqs: c.seqs}
		m.ZeroGrads()
		var ph [3]float64
		var err error
		for i, f := range []func() error{
			func() error { _, err := m.Forward(b, true); return err },
			func() error { return m.Backward(dlp, nil, nil) },
			func() error { opt.apply(m, 1e-5); return nil },
		} {
			if ph[i], err = timed(m.Dev, f); err != nil {
				return nil, err
			}
		}
		row[strings.TrimSuffix(c.key, "step_s")+"phases_s"] = map[string]float64{"forward": ph[0], "backward": ph[1], "adamw": ph[2]}
		fmt.Printf("train %d params, %s: %.4f s (%.0f tokens/s); forward %.4f s, backward %.4f s, AdamW %.4f s\n",
			m.NumParams(), c.key, median(ts), float64(T)/median(ts), ph[0], ph[1], ph[2])
	}
	return row, nil
}

// decodeCase times steps decode steps of batch sequences after a prompt of
// prompt tokens each (one prefill, copied to every slot: the keys and
// values read per step are the same as for distinct prompts).
func decodeCase(m *model.Model, batch, prompt, steps int) (map[string]any, error) {
	rng := rand.New(rand.NewPCG(3, uint64(batch)))
	c := m.NewKVCache(batch, prompt+steps+2)
	defer c.Free(m.Dev)
	dec := model.NewDecoder(m, c)
	defer dec.Free()
	start := time.Now()
	V := m.Config.VocabSize
	if _, err := m.Step(c, []model.Chunk{{Slot: 0, Tokens: randomTokens(rng, prompt, V)}}); err != nil {
		return nil, err
	}
	for s := 1; s < batch; s++ {
		c.CopySlot(m.Dev, s, 0)
	}
	if err := m.Dev.Sync(); err != nil {
		return nil, err
	}
	prefill := time.Since(start).Seconds()
	chunks := make([]model.Chunk, batch)
	seeds := make([]uint64, batch)
	next := randomTokens(rng, batch, V)
	stepOnce := func() error {
		for s := range chunks {
			chunks[s] = model.Chunk{Slot: s, Tokens: []int32{next[s]}}
			seeds[s] = uint64(s)
		}
		out, err := dec.Step(chunks, model.Greedy, seeds, nil)
		if err != nil {
			return err
		}
		copy(next, out.Tokens)
		return nil
	}
	if err := stepOnce(); err != nil { // records the step graph
		return nil, err
	}
	t, err := timed(m.Dev, func() error {
		for range steps {
			if err := stepOnce(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	step := t / float64(steps)
	fmt.Printf("decode batch %d prompt %d: %.3f ms per step, %.0f tokens/s (prefill and copies %.2f s)\n",
		batch, prompt, 1e3*step, float64(batch)/step, prefill)
	return map[string]any{"batch": batch, "prompt": prompt, "new_tokens": steps, "step_s": step,
		"tok_s": float64(batch) / step, "prefill_s": prefill}, nil
}

func decode(m *model.Model) (map[string]any, error) {
	row := map[string]any{"params": m.NumParams()}
	for _, c := range decodeCases {
		r, err := decodeCase(m, c.batch, c.prompt, c.steps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.key, err)
		}
		row[c.key] = r
	}
	return row, nil
}
