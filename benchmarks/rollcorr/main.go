// Command rollcorr measures how far r1go's sampling paths are from its
// trainer on the same weights (benchmarks/rollout-correction.md), and
// summarises the held-out EM runs of em.sh.
//
//	go run ./benchmarks/rollcorr -model DIR [-dtype float32|bfloat16]   # one sampling path
//	R1GO_CPU=avx2 go run ./benchmarks/rollcorr -model DIR -dtype bfloat16  # at another CPU tier
//	go run ./benchmarks/rollcorr -em /tmp/rollcorr-em                   # the EM table of em.sh's runs
//
// The sampler decodes random prompts token by token against its KV cache
// (the rollout's path: Model.Step, then the sampler's log-softmax at
// temperature 1) from the float32 policy or from its frozen bf16 copy with
// bf16 products (rollout.dtype bfloat16); the trainer scores the same
// tokens with its packed training forward and fused LM head (rl.Forward,
// the old-log-prob pass). rl.MismatchMetrics compares the two.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/rl"
)

func main() {
	dir := flag.String("model", "", "Hugging Face model folder (e.g. cmd/train/testdata/warmstart, or a 0.5B-shaped random folder from go run ./benchmarks/cpu/memstep -gen)")
	dtype := flag.String("dtype", "float32", "sampler weights: float32 (the policy itself), bfloat16 (the rollout copy) or mixed (-device cuda: bf16 mixed precision, as train runs there, sampler and trainer alike)")
	seqs := flag.Int("seqs", 8, "sequences decoded together")
	prompt := flag.Int("prompt", 32, "random prompt tokens")
	tokens := flag.Int("tokens", 64, "sampled tokens per sequence")
	seed := flag.Uint64("seed", 1, "prompt and sampling seed")
	em := flag.String("em", "", "summarise em.sh's runs in this folder instead")
	device := flag.String("device", "cpu", "cpu or cuda (the sampler and the trainer both run there)")
	flag.Parse()
	var err error
	switch {
	case *em != "":
		err = emTable(*em)
	case *dir != "":
		err = measure(*dir, *device, *dtype, *seqs, *prompt, *tokens, *seed)
	default:
		err = fmt.Errorf("give -model DIR or -em DIR")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollcorr:", err)
		os.Exit(1)
	}
}

// qwen05B is Qwen2.5-0.5B's config: -model random-0.5b builds it with
// random float32 weights in memory (where no folder can be carried).
const qwen05B = `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
	"intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
	"vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
	"hidden_act": "silu", "initializer_range": 0.02, "tie_word_embeddings": true, "use_sliding_window": false,
	"torch_dtype": "bfloat16"}`

func measure(dir, device, dtype string, seqs, prompt, tokens int, seed uint64) error {
	var dev model.Device = cpu.New()
	if device == "cuda" {
		d, err := cuda.Open()
		if err != nil {
			return err
		}
		dev = d
	}
	var pol *model.Model
	var err error
	if dir == "random-0.5b" {
		cfg, err := model.ParseConfig([]byte(qwen05B), "Qwen2.5-0.5B shape")
		if err != nil {
			return err
		}
		if pol, err = model.New(cfg, dev, model.LMHeadOutput); err != nil {
			return err
		}
		pol.InitRandom(seed)
	} else if pol, err = model.Load(dir, dev, model.LMHeadOutput); err != nil {
		return err
	}
	sampler := pol
	switch dtype {
	case "float32":
	case "mixed": // what cmd/train runs on a GPU: bf16 compute copy and KV cache, fp32 masters; the trainer scores in the same precision
		g, ok := dev.(*cuda.Device)
		if !ok {
			return fmt.Errorf("-dtype mixed needs -device cuda")
		}
		g.UseBF16(pol.Params)
	case "bfloat16":
		if sampler, err = pol.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-dtype %q is not float32, bfloat16 or mixed", dtype)
	}
	V := pol.Config.VocabSize
	rng := rand.New(rand.NewPCG(seed, 7))
	trajs := make([]*rl.Trajectory, seqs)
	chunks := make([]model.Chunk, seqs)
	for i := range trajs {
		tr := &rl.Trajectory{PromptLen: prompt}
		for range prompt {
			tr.Tokens = append(tr.Tokens, int32(rng.IntN(V)))
		}
		tr.Action, tr.LogProb = make([]bool, prompt), make([]float32, prompt)
		trajs[i] = tr
		chunks[i] = model.Chunk{Slot: i, Tokens: tr.Tokens}
	}
	cache := sampler.NewKVCache(seqs, prompt+tokens+1)
	s := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	var scratch []int32
	t0 := time.Now()
	for k := 0; k < tokens; k++ {
		logits, err := sampler.Step(cache, chunks)
		if err != nil {
			return err
		}
		for i, tr := range trajs {
			id, lp := model.SampleToken(logits[i*V:(i+1)*V], s, rng, &scratch)
			tr.Tokens = append(tr.Tokens, id)
			tr.Action = append(tr.Action, true)
			tr.LogProb = append(tr.LogProb, lp)
			chunks[i] = model.Chunk{Slot: i, Tokens: []int32{id}}
		}
	}
	decode := time.Since(t0)
	b := rl.FromTrajectories(trajs, true)
	t1 := time.Now()
	old, _, _, err := rl.Forward(pol, b, 1<<14)
	if err != nil {
		return err
	}
	score := time.Since(t1)
	m, err := rl.MismatchMetrics(b.Offsets, b.ActionMask, b.SampleLogProb, old)
	if err != nil {
		return err
	}
	tier := os.Getenv("R1GO_CPU")
	if tier == "" {
		tier = "best"
	}
	if device == "cuda" {
		tier = "cuda"
	}
	fmt.Printf("model %s, sampler %s, tier %s: %d×%d sampled tokens (decode %.1f s, trainer scoring %.1f s)\n",
		dir, dtype, tier, seqs, tokens, decode.Seconds(), score.Seconds())
	var maxLog float64 // the largest |log π − log μ| of a sampled token
	for k, on := range b.ActionMask {
		if on {
			maxLog = max(maxLog, math.Abs(old[k]-b.SampleLogProb[k]))
		}
	}
	fmt.Printf("| %s | %s | %s | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.6f |\n", dir, dtype, tier,
		m["training/rollout_probs_diff_mean"], m["training/rollout_probs_diff_max"], m["training/rollout_probs_diff_std"],
		maxLog, m["rollout_corr/kl"], m["rollout_corr/k3_kl"], m["rollout_corr/ppl_ratio"])
	return nil
}
