// Command memstep measures the peak memory of one full-fine-tuning GRPO
// step of a Qwen2.5-0.5B-shaped model on the CPU, phase by phase, and prints
// where every GiB goes next to /proc/self/status's VmRSS and VmHWM.
//
// The model is a random-weight folder with Qwen2.5-0.5B's real config (hidden
// 896, 24 layers, 14 heads, 2 KV heads, MLP 4864, vocabulary 151,936, tied
// embeddings) stored as bf16, generated on first use into -dir by a child
// process (so that generating it does not count in this process's peak);
// weights are never committed. Usage:
//
//	go run ./benchmarks/cpu/memstep [-dir /tmp/r1go-qwen2.5-0.5b-random] [-state bfloat16] [-ref auto]
//
// Phases: load the policy (float32 master weights), load the reference
// (frozen; bf16 when the folder is bf16), the optimizer, a batch of
// rollout decode steps through the KV cache (8 prompts × 4 samples), old
// and reference log-probs of one micro-batch, one training micro-batch
// (forward with recomputation, backward), the AdamW step and a checkpoint
// (bf16 weights and optimizer state). Timings are printed too; the machine
// these figures come from is shared, so they are only indicative.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/safetensors"
	"github.com/r1go/r1go/optim"
)

// qwen05B is Qwen2.5-0.5B's config.json (the architecture keys as
// published; the weights here are random).
const qwen05B = `{
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
`

// qwen15B is Qwen2.5-1.5B's config.json (architecture keys as published).
const qwen15B = `{
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 1536,
  "initializer_range": 0.02,
  "intermediate_size": 8960,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 12,
  "num_hidden_layers": 28,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
`

var shapes = map[string]string{"0.5b": qwen05B, "1.5b": qwen15B}

func main() {
	shape := flag.String("shape", "0.5b", "model shape: 0.5b or 1.5b (Qwen2.5's configs)")
	configPath := flag.String("config", "", "a config.json to generate the folder from instead of -shape's (e.g. model/testdata/config_qwen2.5-3b.json)")
	dir := flag.String("dir", "", "model folder (generated when missing; default /tmp/r1go-qwen2.5-<shape>-random)")
	loraRank := flag.Int("lora", 0, "LoRA rank on every projection of a frozen bf16 base (0: full fine-tuning)")
	genOnly := flag.Bool("gen", false, "only generate the folder (the child process)")
	state := flag.String("state", "bfloat16", "optimizer state dtype: float32 or bfloat16")
	ref := flag.String("ref", "auto", "reference policy storage: auto (bf16 from a bf16 folder), float32 or none")
	prompts := flag.Int("prompts", 8, "prompts per step")
	samples := flag.Int("n", 4, "samples per prompt")
	promptLen := flag.Int("prompt_len", 64, "prompt tokens")
	respLen := flag.Int("response_len", 256, "response tokens (the KV cache is sized for them)")
	decodeSteps := flag.Int("decode_steps", 8, "decode steps actually run (memory does not grow with them past the cache)")
	micro := flag.Int("micro_tokens", 8192, "tokens of the one training micro-batch (the trainer's default micro_batch_tokens)")
	save := flag.Bool("save", true, "write a checkpoint (bf16 weights + optimizer state) into a temporary folder")
	memprofile := flag.String("memprofile", "", "write a heap profile (go tool pprof -sample_index=alloc_space) here at the end")
	flag.Parse()
	if *configPath != "" {
		raw, err := os.ReadFile(*configPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "memstep:", err)
			os.Exit(2)
		}
		*shape = strings.TrimSuffix(filepath.Base(*configPath), ".json")
		shapes[*shape] = string(raw)
	}
	if shapes[*shape] == "" {
		fmt.Fprintf(os.Stderr, "memstep: -shape %q is not 0.5b or 1.5b\n", *shape)
		os.Exit(2)
	}
	if *dir == "" {
		*dir = filepath.Join(os.TempDir(), "r1go-qwen2.5-"+*shape+"-random")
	}
	if *genOnly {
		if err := generate(*dir, shapes[*shape]); err != nil {
			fmt.Fprintln(os.Stderr, "memstep:", err)
			os.Exit(1)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(*dir, "model.safetensors")); err != nil {
		fmt.Printf("generating %s in a child process\n", *dir)
		args := []string{"-gen", "-dir", *dir, "-shape", *shape}
		if *configPath != "" {
			args = append(args, "-config", *configPath)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "memstep: generating:", err)
			os.Exit(1)
		}
	}
	if err := run(*dir, *state, *ref, *loraRank, *prompts**samples, *promptLen, *respLen, *decodeSteps, *micro, *save); err != nil {
		fmt.Fprintln(os.Stderr, "memstep:", err)
		os.Exit(1)
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err == nil {
			err = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "memstep:", err)
			os.Exit(1)
		}
	}
}

// generate writes the random-weight folder: normal(0, 0.02) matrices, unit
// norms, zero biases, as transformers initialises a fresh model, drawn
// straight into bf16 bytes (the process holds one bf16 copy, never a
// float32 one). Each chunk of genChunk values has its own stream (seeded by
// tensor and chunk), so every core draws at once and the folder's bits do
// not depend on how many there are: a 3B folder takes seconds, not minutes.
func generate(dir, config string) error {
	cfg, err := model.ParseConfig([]byte(config), "config.json")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	const genChunk = 1 << 22
	type job struct {
		name     string
		raw      []byte
		tensor   int
		from, to int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				rng := rand.New(rand.NewPCG(uint64(20+j.tensor), uint64(j.from/genChunk)))
				for i := j.from; i < j.to; i++ {
					var v float32
					switch {
					case strings.HasSuffix(j.name, "norm.weight"):
						v = 1
					case strings.HasSuffix(j.name, ".bias"):
						v = 0
					default:
						v = float32(0.02 * rng.NormFloat64())
					}
					binary.LittleEndian.PutUint16(j.raw[2*i:], bf16.FromFloat32(v))
				}
			}
		}()
	}
	var ts []safetensors.Tensor
	for k, e := range model.ExpectedTensors(cfg) {
		n := 1
		for _, d := range e.Shape {
			n *= d
		}
		raw := make([]byte, 2*n)
		for from := 0; from < n; from += genChunk {
			jobs <- job{name: e.Name, raw: raw, tensor: k, from: from, to: min(from+genChunk, n)}
		}
		ts = append(ts, safetensors.Tensor{Name: e.Name, DType: safetensors.BF16, Shape: e.Shape, Raw: raw})
	}
	close(jobs)
	wg.Wait()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		return err
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"})
}

// memGiB reads VmRSS and VmHWM from /proc/self/status, in GiB.
func memGiB() (rss, hwm float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb float64
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			fmt.Sscanf(strings.TrimPrefix(line, "VmRSS:"), "%f", &kb)
			rss = kb / (1 << 20)
		case strings.HasPrefix(line, "VmHWM:"):
			fmt.Sscanf(strings.TrimPrefix(line, "VmHWM:"), "%f", &kb)
			hwm = kb / (1 << 20)
		}
	}
	return rss, hwm
}

const gib = 1 << 30

func run(dir, state, refMode string, loraRank, seqs, promptLen, respLen, decodeSteps, micro int, save bool) error {
	var plan []string
	var planned float64
	account := func(what string, bytes float64) {
		planned += bytes / gib
		plan = append(plan, fmt.Sprintf("  %-44s %6.3f GiB", what, bytes/gib))
	}
	t0 := time.Now()
	phase := func(name string) {
		rss, hwm := memGiB()
		fmt.Printf("%-34s %7.1f s   VmRSS %6.3f GiB   VmHWM %6.3f GiB   planned so far %6.3f GiB\n",
			name, time.Since(t0).Seconds(), rss, hwm, planned)
		t0 = time.Now()
	}
	phase("start")
	dev := cpu.New()
	var pol, refM *model.Model
	var err error
	var opt *optim.AdamW
	ocfg := optim.DefaultConfig()
	ocfg.StateDType = state
	per := 4.0
	if state == "bfloat16" {
		per = 2
	}
	if loraRank > 0 {
		// LoRA: a frozen base (bf16 from a bf16 folder), adapters on every
		// projection, the base itself as the reference.
		if pol, err = model.LoadWith(dir, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "auto"}); err != nil {
			return err
		}
		n := float64(pol.NumParams())
		bpp := 4.0
		if cpu.IsBF16(pol.Params) {
			bpp = 2
		}
		account(fmt.Sprintf("frozen base (%.0f M params, %d-byte)", n/1e6, int(bpp)), bpp*n)
		lo, err := pol.AttachLoRA(model.LoRAConfig{Rank: loraRank, Alpha: 2 * float64(loraRank), TargetModules: []string{"all-linear"}}, 1)
		if err != nil {
			return err
		}
		na := float64(lo.Params.Len())
		account(fmt.Sprintf("adapters r=%d (%.1f M params) + grads, float32", loraRank, na/1e6), 8*na)
		phase("load base, attach adapters")
		refM = pol.Base()
		p, g := pol.Trainable()
		if opt, err = optim.New(dev, p, g, ocfg, 1); err != nil {
			return err
		}
		account(fmt.Sprintf("AdamW moments of the adapters (%s)", state), 2*per*na)
		phase("optimizer")
	} else {
		if pol, err = model.Load(dir, dev, model.LMHeadOutput); err != nil {
			return err
		}
		n := float64(pol.NumParams())
		account(fmt.Sprintf("policy weights (%.0f M params, float32)", n/1e6), 4*n)
		account("policy gradients (float32)", 4*n)
		phase("load policy")
		if refMode != "none" {
			if refM, err = model.LoadWith(dir, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: refMode}); err != nil {
				return err
			}
			rb := 4.0
			if cpu.IsBF16(refM.Params) {
				rb = 2
			}
			account(fmt.Sprintf("reference weights (frozen, %d-byte)", int(rb)), rb*n)
			phase("load reference")
		}
		if opt, err = optim.New(dev, pol.Params, pol.Grads, ocfg, 1); err != nil {
			return err
		}
		account(fmt.Sprintf("AdamW moments m, v (%s)", state), 2*per*n)
		phase("optimizer (moments untouched)")
	}

	// Rollout: prefill every sample's prompt, then decode steps for all.
	cfg := pol.Config
	maxLen := promptLen + respLen
	cache := pol.NewKVCache(seqs, maxLen)
	for l := range cache.K { // touch every page, as a full rollout would
		dev.Zero(cache.K[l])
		dev.Zero(cache.V[l])
	}
	kv := float64(cfg.NumHiddenLayers) * float64(seqs) * float64(maxLen) * float64(cfg.NumKeyValueHeads*cfg.HeadDim()) * 2 * 4
	account(fmt.Sprintf("KV cache (%d slots × %d positions)", seqs, maxLen), kv)
	rng := rand.New(rand.NewPCG(1, 2))
	tok := func() int32 { return int32(rng.IntN(cfg.VocabSize)) }
	var chunks []model.Chunk
	for s := range seqs {
		p := make([]int32, promptLen)
		for i := range p {
			p[i] = tok()
		}
		chunks = append(chunks, model.Chunk{Slot: s, Tokens: p})
	}
	if _, err := pol.Step(cache, chunks); err != nil {
		return err
	}
	phase(fmt.Sprintf("rollout prefill %d × %d", seqs, promptLen))
	td := time.Now()
	for range decodeSteps {
		for s := range chunks {
			chunks[s].Tokens = []int32{tok()}
		}
		if _, err := pol.Step(cache, chunks); err != nil {
			return err
		}
	}
	fmt.Printf("  decode: %.1f tokens/s at batch %d\n", float64(decodeSteps*seqs)/time.Since(td).Seconds(), seqs)
	phase(fmt.Sprintf("rollout decode %d steps", decodeSteps))

	// One micro-batch of packed sequences.
	per1 := promptLen + respLen
	var b model.Batch
	b.Seqs = []int32{0}
	for len(b.Tokens)+per1 <= max(micro, per1) {
		for range per1 {
			b.Tokens = append(b.Tokens, tok())
		}
		b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
	}
	T := len(b.Tokens)
	if _, err := pol.Forward(b, false); err != nil {
		return err
	}
	phase(fmt.Sprintf("old log-probs (%d tokens)", T))
	if refM != nil {
		if _, err := refM.Forward(b, false); err != nil {
			return err
		}
		phase("reference log-probs")
	}
	pol.Recompute = true
	out, err := pol.Forward(b, true)
	if err != nil {
		return err
	}
	// The scoring arenas of a long batch are freed after scoring (grouped
	// forward); the training arena is what the model says it allocates.
	acts := 4 * float64(pol.ActivationValues(b, true))
	account(fmt.Sprintf("activations (%d-token training micro-batch, recompute, grouped)", T), acts)
	phase("train forward (recompute)")
	g := make([]float32, T)
	for i := range g {
		g[i] = -1 / float32(T)
	}
	_ = out
	if err := pol.Backward(g, nil, nil); err != nil {
		return err
	}
	phase("train backward")
	r := opt.Step(1)
	phase(fmt.Sprintf("AdamW step (grad norm %.3g)", r.GradNorm))
	if save {
		ck, err := os.MkdirTemp("", "memstep-ckpt-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ck)
		if lo := pol.Adapters(); lo != nil {
			if err := lo.SaveAdapter(filepath.Join(ck, "actor_adapter"), dev, dir); err != nil {
				return err
			}
		} else if err := pol.Save(filepath.Join(ck, "actor"), nil, model.SaveOptions{DType: "bfloat16"}); err != nil {
			return err
		}
		if err := opt.Save(filepath.Join(ck, "actor_optim.safetensors")); err != nil {
			return err
		}
		phase("checkpoint (bf16 weights + optimizer)")
	}
	_, hwm := memGiB()
	fmt.Printf("\nmemory plan (Go heap arenas):\n%s\n  %-44s %6.3f GiB\n", strings.Join(plan, "\n"), "total", planned)
	fmt.Printf("peak RSS (VmHWM) %.3f GiB = %.2f GB; plan / peak = %.3f\n", hwm, hwm*gib/1e9, planned/hwm)
	return nil
}
