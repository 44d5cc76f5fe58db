package cuda

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/optim"
)

// allocPeak reads the emulator's allocation log from byte offset from on
// ("alloc <address> <bytes>", "free <address>", and a VMM arena's "map
// <address> <bytes>" and "unmap <address> <bytes>" per chunk; "reserve"
// and "unreserve" take no memory) and returns the peak of the bytes live
// in that window: a free of an address not allocated in it (a buffer of
// an earlier test) is ignored.
func allocPeak(t *testing.T, path string, from int64) (peak int64) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) < from {
		t.Fatalf("%s shrank below %d bytes: another process opened it (one test binary per log)", path, from)
	}
	live, sizes := int64(0), map[string]int64{}
	for k, l := range strings.Split(string(raw[from:]), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "alloc":
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s: line %d past offset %d: %q: %v", path, k+1, from, l, err)
			}
			sizes[f[1]] = n
			live += n
			peak = max(peak, live)
		case len(f) == 2 && f[0] == "free":
			live -= sizes[f[1]]
			delete(sizes, f[1])
		case len(f) == 3 && f[0] == "map":
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s: line %d past offset %d: %q: %v", path, k+1, from, l, err)
			}
			sizes["map "+f[1]] = n
			live += n
			peak = max(peak, live)
		case len(f) == 3 && f[0] == "unmap":
			live -= sizes["map "+f[1]]
			delete(sizes, "map "+f[1])
		case len(f) == 3 && (f[0] == "reserve" || f[0] == "unreserve"):
		case len(f) != 0:
			t.Fatalf("%s: line %d past offset %d is not an alloc or free record: %q", path, k+1, from, l)
		}
	}
	return peak
}

// TestGPUPlanMatchesEmuAllocLog is model/plan's TestPlanMatchesCPUAllocations
// for the CUDA device in mixed precision, measured by the emulator's
// allocation log (every cuMemAlloc and cuMemFree). On a Device of its own
// it builds what cmd/train builds for GRPO: the policy with its bf16 copy
// (useMixed: Device.UseBF16 on the fp32 arena the optimizer updates), AdamW,
// and the frozen reference (bf16 weights only, no gradients).
// Then a rollout as rl's device sampler runs it (model.Decoder: a prefill
// step of the group leaders' prompts beside one-token decodes, then a
// decode-only step through the step graph and device sampling), the
// reference's scoring forward, the policy's training forward and backward
// at the micro-batch and an AdamW step, and the next step's rollout, which
// keeps the training arena, and a held-out evaluation beside it (a KV
// cache of its own, every slot prefilling). The peak of live bytes in the log must be
// within 10% of plan.New's total for the same settings (device "cuda",
// precision "bf16-mixed") less its workspace item, which is an estimate of
// the CUDA context, kernels and cuBLAS (none of them cuMemAlloc'd on the
// emulator) — the same comparison as the CPU test. The device's own
// scratch buffers (the LM head's logit chunk, bf16 rounding of matmul
// operands, the sampler's buffers) are in the log and so in the measured
// peak; the plan counts them as its "device scratch" item. The shapes (a
// vocabulary of 3000, micro-batches of 384 tokens) make that scratch about
// a sixth of the peak, so a plan without it fails (ratio 0.84).
func TestGPUPlanMatchesEmuAllocLog(t *testing.T) {
	g := gpuOrSkip(t)
	path := os.Getenv("R1GO_EMU_ALLOC_LOG")
	if path == "" || !strings.Contains(g.Name(), "emulator") {
		t.Skip("not on the emulator with R1GO_EMU_ALLOC_LOG set")
	}
	defer func(old int) { model.GroupBytes = old }(model.GroupBytes)
	for _, c := range []struct {
		mt      string
		grouped bool
	}{{"qwen2", false}, {"qwen3", false}, {"qwen2", true}, {"qwen3", true}} {
		mt := c.mt
		// grouped: recomputation, and the training and scoring forwards
		// in groups of sequences (model.GroupBytes lowered; the plan reads
		// it too), as a long micro-batch of a large model runs.
		model.GroupBytes = 64 << 20
		if c.grouped {
			model.GroupBytes = 64 << 10
		}
		raw := `{"model_type": "qwen2", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 3000, "tie_word_embeddings": false}`
		if mt == "qwen3" {
			raw = `{"model_type": "qwen3", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48, "vocab_size": 3000, "tie_word_embeddings": true}`
		}
		cfg, err := model.ParseConfig([]byte(raw), mt+" config")
		if err != nil {
			t.Fatal(err)
		}
		s := plan.Settings{Device: "cuda", Precision: "bf16-mixed", Train: true, Reference: true,
			MicroBatchTokens: 384, RolloutSlots: 6, MaxContext: 64, MaxPromptTokens: 7, GroupSize: 3, Recompute: c.grouped,
			EvalSlots: 5, EvalOwnCache: true}
		p, err := plan.New(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		ws := p.Items[len(p.Items)-1]
		if ws.Name != "workspace" {
			t.Fatal("the plan's last item is not the workspace")
		}
		want := p.Total() - ws.Bytes

		g.Free(g.Alloc(1)) // the emulator opens (truncates) the log at its first allocation
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		from := fi.Size()
		d, err := OpenWith(Options{Ordinal: 0})
		if err != nil {
			t.Fatal(err)
		}
		policy, err := model.New(cfg, d, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		policy.InitRandom(1)
		policy.Recompute = c.grouped
		d.UseBF16(policy.Params)
		// The reference as rl.NewTrainer loads it on a mixed-precision
		// device: frozen, bf16 weights only (frozen.go).
		ref, err := policy.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16"})
		if err != nil {
			t.Fatal(err)
		}
		d.UseBF16(ref.Params) // what cmd/train's useMixed does: nothing more for bf16 weights
		opt, err := optim.New(d, policy.Params, policy.Grads, optim.DefaultConfig(), 10)
		if err != nil {
			t.Fatal(err)
		}
		dec := model.NewDecoder(policy, policy.NewKVCache(s.RolloutSlots, s.MaxContext))
		sampling := model.Sampling{Temperature: 1, TopP: 0.9, TopK: 50}
		seeds := make([]uint64, s.RolloutSlots)
		rollout := func(prefill bool) {
			t.Helper()
			var chunks []model.Chunk
			for slot := 0; slot < s.RolloutSlots; slot++ {
				n := 1
				if prefill && slot%s.GroupSize == 0 {
					n = s.MaxPromptTokens
				}
				tok := make([]int32, n)
				for i := range tok {
					tok[i] = int32((slot*31 + i*7 + 5) % cfg.VocabSize)
				}
				chunks = append(chunks, model.Chunk{Slot: slot, Tokens: tok})
				seeds[slot]++
			}
			if _, err := dec.Step(chunks, sampling, seeds, nil); err != nil {
				t.Fatal(err)
			}
		}
		rollout(true)
		rollout(false)
		tokens := make([]int32, s.MicroBatchTokens)
		for i := range tokens {
			tokens[i] = int32((i*7919 + 13) % cfg.VocabSize)
		}
		b := model.Batch{Tokens: tokens, Seqs: []int32{0, 64, 128, 192, 256, 320, 384}}
		if _, err := ref.Forward(b, false); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.Forward(b, true); err != nil {
			t.Fatal(err)
		}
		dlp := make([]float32, len(tokens))
		for i := range dlp {
			dlp[i] = -1 / float32(len(tokens))
		}
		if err := policy.Backward(dlp, nil, nil); err != nil {
			t.Fatal(err)
		}
		if r := opt.Step(1); r.Skipped {
			t.Fatal("the AdamW step was skipped (non-finite gradient norm)")
		}
		rollout(false) // the next step's rollout: the policy keeps its training arena
		// The next step's reference scoring beside it (a grouped scoring
		// arena is freed after each Forward: this is where it peaks).
		if _, err := ref.Forward(b, false); err != nil {
			t.Fatal(err)
		}
		// A held-out evaluation as cmd/train runs one (agent.Evaluate): a
		// cache of its own beside the rollout's, every slot a question
		// prefilling its prompt in the first step.
		evalDec := model.NewDecoder(policy, policy.NewKVCache(s.EvalSlots, s.MaxContext))
		var evalChunks []model.Chunk
		for slot := range s.EvalSlots {
			tok := make([]int32, s.MaxPromptTokens)
			for i := range tok {
				tok[i] = int32((slot*17 + i*3 + 1) % cfg.VocabSize)
			}
			evalChunks = append(evalChunks, model.Chunk{Slot: slot, Tokens: tok})
		}
		if _, err := evalDec.Step(evalChunks, model.Greedy, make([]uint64, s.EvalSlots), nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		peak := allocPeak(t, path, from)
		// The Device's own accounting (memstats.go, what a real card
		// reports with R1GO_CUDA_MEMSTATS=1) against the driver's log.
		if _, own := d.AllocatedBytes(); own != peak {
			t.Errorf("%s: Device.AllocatedBytes peak %d B, the emulator's allocation log %d B", mt, own, peak)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		r := float64(want) / float64(peak)
		mt = fmt.Sprintf("%s grouped=%v", mt, c.grouped)
		t.Logf("%s: plan less workspace %d B, emulator log peak %d B, ratio %.4f", mt, want, peak, r)
		if math.Abs(r-1) > 0.10 || math.IsNaN(r) {
			var sb strings.Builder
			p.Print(&sb)
			t.Errorf("%s: plan %d B (less workspace), allocation log peak %d B (ratio %.3f)\n%s", mt, want, peak, r, sb.String())
		}
	}
}
