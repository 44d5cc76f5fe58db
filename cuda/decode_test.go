package cuda

import (
	"math"
	"slices"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestGPUStepSample decodes with Model.StepSample on both devices: the GPU
// draws on the device (model.Sampler) and downloads only the kept
// rows. Greedy steps choose the CPU's tokens and keep its logits within
// 1e-4; top-k/top-p steps (the GPU's tokens fed to both models) draw a
// token of the host's kept set with the host's log-softmax.
func TestGPUStepSample(t *testing.T) {
	gpu := gpuOrSkip(t)
	cfg := tinyQwen(t)
	V := cfg.VocabSize
	var models []*model.Model
	var caches []*model.KVCache
	for _, d := range []model.Device{cpu.New(), gpu} {
		m, err := model.New(cfg, d, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(5)
		models = append(models, m)
		caches = append(caches, m.NewKVCache(3, 64))
	}
	chunks := []model.Chunk{{Slot: 0, Tokens: []int32{1, 2, 3, 4, 5}}, {Slot: 2, Tokens: []int32{40, 41, 42}}}
	all := []int{0, 1}
	for step := 0; step < 8; step++ {
		s := model.Greedy
		if step >= 4 {
			s = model.Sampling{Temperature: 1.1, TopP: 0.9, TopK: 7}
		}
		seeds := []uint64{uint64(100 + step), uint64(200 + step)}
		var outs [2]model.Decoded
		for k, m := range models {
			o, err := m.StepSample(caches[k], chunks, s, seeds, all)
			if err != nil {
				t.Fatal(err)
			}
			outs[k] = o
		}
		if e := relErr(outs[1].Logits, outs[0].Logits); !(e <= 1e-4) {
			t.Fatalf("step %d: kept logits relative error %.3g", step, e)
		}
		next := make([]model.Chunk, len(chunks))
		for j, c := range chunks {
			row := outs[0].Logits[j*V : (j+1)*V]
			tok := outs[1].Tokens[j]
			if s.Temperature == 0 {
				if tok != outs[0].Tokens[j] || outs[1].LogProbs[j] != 0 {
					t.Fatalf("greedy step %d chunk %d: GPU token %d (logprob %v), CPU %d", step, j, tok, outs[1].LogProbs[j], outs[0].Tokens[j])
				}
			} else {
				if !slices.Contains(keptSet(row, s), tok) {
					t.Fatalf("step %d chunk %d: GPU token %d outside the host's kept set %v", step, j, tok, keptSet(row, s))
				}
				want := hostLogSoftmax(row, s.Temperature)[tok]
				if math.Abs(float64(outs[1].LogProbs[j])-want) > 1e-3 {
					t.Fatalf("step %d chunk %d: logprob %v, host %v", step, j, outs[1].LogProbs[j], want)
				}
			}
			next[j] = model.Chunk{Slot: c.Slot, Tokens: []int32{tok}}
		}
		chunks = next
	}
}

// TestGPUDecoderGraph decodes with model.Decoder, whose decode steps on
// the GPU replay a CUDA graph (GraphStep) and sample on the device, next
// to the CPU's StepSample: a prefill (not graphed), then greedy steps
// whose tokens and logits must match the CPU's, with a sequence leaving
// the batch half-way (a new row count: a second graph). The graphs must
// actually replay, and the replays must see each step's new token ids and
// positions (the logits would go stale otherwise).
func TestGPUDecoderGraph(t *testing.T) {
	gpu := gpuOrSkip(t)
	cfg := tinyQwen(t)
	var models []*model.Model
	var caches []*model.KVCache
	for _, d := range []model.Device{cpu.New(), gpu} {
		m, err := model.New(cfg, d, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(7)
		models = append(models, m)
		caches = append(caches, m.NewKVCache(4, 64))
	}
	dec := model.NewDecoder(models[1], caches[1])
	defer dec.Free()
	graphs0, replays0 := gpu.StepGraphs()
	chunks := []model.Chunk{{Slot: 0, Tokens: []int32{3, 1, 4, 1, 5}}, {Slot: 1, Tokens: []int32{9, 2, 6}}, {Slot: 3, Tokens: []int32{5, 3}}}
	for step := 0; step < 9; step++ {
		keep := make([]int, len(chunks))
		for j := range keep {
			keep[j] = j
		}
		seeds := make([]uint64, len(chunks))
		cpu, err := models[0].StepSample(caches[0], chunks, model.Greedy, seeds, keep)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.Step(chunks, model.Greedy, seeds, keep)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(got.Logits, cpu.Logits); !(e <= 1e-4) {
			t.Fatalf("step %d: logits relative error %.3g", step, e)
		}
		if !slices.Equal(got.Tokens, cpu.Tokens) {
			t.Fatalf("step %d: tokens %v, CPU %v", step, got.Tokens, cpu.Tokens)
		}
		var next []model.Chunk
		for j, c := range chunks {
			if step == 4 && j == 1 {
				continue // this sequence ends; the batch shrinks to two rows
			}
			next = append(next, model.Chunk{Slot: c.Slot, Tokens: []int32{got.Tokens[j]}})
		}
		chunks = next
	}
	graphs, replays := gpu.StepGraphs()
	t.Logf("%d step graphs recorded, %d replays", graphs-graphs0, replays-replays0)
	// Steps 1-4 with three rows (recorded at 1, replayed at 2-4), 5-8 with
	// two (recorded at 5, replayed at 6-8).
	if graphs-graphs0 != 2 || replays-replays0 != 6 {
		t.Errorf("%d graphs and %d replays, want 2 and 6", graphs-graphs0, replays-replays0)
	}
}

// TestGPUDecodeTCStep decodes a small Qwen2 model (two layers, two query
// heads of 64 over one key-value head, q/k/v biases) in mixed precision,
// as rollouts run it: a prefill of three slots, then greedy decode steps
// through model.Decoder, whose steps replay a recorded graph and take the
// tensor-core attention with bias and RoPE folded in (one kernel a layer),
// split 3 ways, so the combine's arrival counts must come back to zero
// between replays. Every model gets the CPU's tokens. Each step's logits
// must equal those of the same GPU model run step by step without the
// fold (separate bias, RoPE and tensor-core attention: the fold changes
// no arithmetic) and without graphs; stay within 1e-2 of the CUDA-core
// path's (R1GO_CUDA_DECODE_TC=0), whose attention differs in float32
// rounding, enough to flip some bf16 roundings downstream (3e-3 seen);
// and within mixed precision's 2e-2 of the CPU's float32 model (1e-2 seen).
func TestGPUDecodeTCStep(t *testing.T) {
	gpu := newMixedEnv(t).gpu // UseBF16 switches a device to mixed precision for good
	defer func(s int, on bool) { decodeForceSplits, decodeTCOn = s, on }(decodeForceSplits, decodeTCOn)
	decodeForceSplits = 3
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128,
		"intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 512, "hidden_act": "silu", "initializer_range": 0.05,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "decode step test config")
	if err != nil {
		t.Fatal(err)
	}
	// cpu, the graphed and folded GPU model, unfolded, CUDA-core.
	var models []*model.Model
	var caches []*model.KVCache
	for k, d := range []model.Device{cpu.New(), gpu, unfolded{Device: gpu}, gpu} {
		m, err := model.New(cfg, d, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(9)
		if k > 0 {
			gpu.UseBF16(m.Params)
			defer gpu.Free(m.Params)
		}
		c := m.NewKVCache(4, 150)
		defer c.Free(d)
		models, caches = append(models, m), append(caches, c)
	}
	if b, ok := caches[1].K[0].(Buffer); !ok || b.dtype != BF16 {
		t.Fatalf("the mixed-precision model's KV cache is not bf16")
	}
	dec := model.NewDecoder(models[1], caches[1])
	defer dec.Free()
	_, replays0 := gpu.StepGraphs()
	chunks := []model.Chunk{{Slot: 0, Tokens: []int32{3, 1, 4, 1, 5, 9, 2, 6, 5}}, {Slot: 1, Tokens: []int32{9, 2, 6}},
		{Slot: 3, Tokens: []int32{5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3}}}
	keep := []int{0, 1, 2}
	seeds := make([]uint64, 3)
	const steps = 8
	for step := 0; step < steps; step++ {
		cpu, err := models[0].StepSample(caches[0], chunks, model.Greedy, seeds, keep)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.Step(chunks, model.Greedy, seeds, keep)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := models[2].StepSample(caches[2], chunks, model.Greedy, seeds, keep)
		if err != nil {
			t.Fatal(err)
		}
		decodeTCOn = false
		core, err := models[3].StepSample(caches[3], chunks, model.Greedy, seeds, keep)
		decodeTCOn = true
		if err != nil {
			t.Fatal(err)
		}
		ePlain, eCore, eCPU := relErr(got.Logits, plain.Logits), relErr(got.Logits, core.Logits), relErr(got.Logits, cpu.Logits)
		t.Logf("step %d: logits relative error %.3g against the unfolded steps, %.3g against the CUDA-core path, %.3g against the CPU", step, ePlain, eCore, eCPU)
		if ePlain != 0 || !(eCore <= 1e-2) || !(eCPU <= 2e-2) {
			t.Fatalf("step %d: logits relative error %.3g against the unfolded steps (want 0), %.3g against the CUDA-core path (bound 1e-2), %.3g against the CPU (bound 2e-2)", step, ePlain, eCore, eCPU)
		}
		for j, c := range chunks {
			chunks[j] = model.Chunk{Slot: c.Slot, Tokens: []int32{cpu.Tokens[j]}}
		}
	}
	// The prefill runs plainly, the first decode step records the graph,
	// the other steps replay it.
	if _, replays := gpu.StepGraphs(); replays-replays0 != steps-2 {
		t.Errorf("%d step graph replays, want %d", replays-replays0, steps-2)
	}
}

// unfolded is the GPU with a step's attention prologue (AttentionCached's
// bias and rotation) run as the separate ops AddBias and RoPE, before
// the cached attention of an unrotated qkv.
type unfolded struct{ *Device }

func (u unfolded) AttentionCached(out, qkv, bias, kc, vc model.Buffer, slots, pos0, lens []int32, maxLen, NH, KVH, HS int, theta float64) {
	if theta > 0 {
		W := (NH + 2*KVH) * HS
		var pos []int32
		for j, n := range lens {
			for i := range n {
				pos = append(pos, pos0[j]+i)
			}
		}
		if bias != nil {
			u.AddBias(qkv, W, bias, len(pos), W)
		}
		u.RoPE(qkv, W, 0, pos, NH, HS, theta)
		u.RoPE(qkv, W, NH*HS, pos, KVH, HS, theta)
	}
	u.Device.AttentionCached(out, qkv, nil, kc, vc, slots, pos0, lens, maxLen, NH, KVH, HS, 0)
}
