package plan_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// The plan of Agent-R1's Table 3 GRPO run with Qwen2.5-3B on one 80 GB
// card, as cmd/train plans it for the CUDA device: bf16 mixed precision
// (Device.UseBF16 on the policy: a bf16 compute copy beside its fp32
// arena, fp32 gradients and AdamW; a frozen reference of bf16 weights
// only; the KV cache, the residual stream and each layer's norm,
// projection, attention and MLP outputs in bf16; statistics, the final
// norm, the loss head and gradients in fp32), 128 prompts × 5 samples
// (640 rollout slots), responses ≤ 500 tokens, context ≤ 4096 (prompts ≤
// 512), the KL loss's reference policy, micro-batches of 16384 tokens,
// which the training and scoring forwards run in groups of sequences (at
// most a context plus a few short ones). The KV cache of 640 full-context
// slots alone is 90 GiB; with the advice applied (as many slots as fit:
// 115) it fits.
func Example_table3() {
	cfg, err := model.LoadConfig(filepath.Join("..", "testdata", "config_qwen2.5-3b.json"))
	if err != nil {
		panic(err)
	}
	s := plan.Settings{Device: "cuda", Capacity: 80 << 30, Precision: "bf16-mixed", Train: true, Reference: true,
		MicroBatchTokens: 16384, RolloutSlots: 640, MaxContext: 4096, MaxPromptTokens: 512, GroupSize: 5}
	fitted := s
	fitted.RolloutSlots = 115
	for _, t := range []plan.Settings{s, fitted} {
		p, err := plan.New(cfg, t)
		if err != nil {
			panic(err)
		}
		if _, err := plan.Report(os.Stdout, p, cfg, true); err != nil {
			panic(err)
		}
		fmt.Println()
	}
	// Output:
	// memory plan: qwen2, 36 layers, hidden 2048, 3.09B parameters on cuda (bf16-mixed)
	//   weights                        5.748 GiB  3085938688 parameters × 2 B, the bf16 compute copy (Device.UseBF16)
	//   master weights                11.496 GiB  the fp32 arena the optimizer updates
	//   gradients                     11.496 GiB  fp32, one arena
	//   optimizer state               22.992 GiB  AdamW first and second moments, fp32
	//   reference policy               6.305 GiB  frozen (no gradients), bf16 weights only (cuda AllocBF16: fp32 sources rounded once at load), plus scoring activations at 16384 tokens, in groups of sequences (≤ 4128 tokens)
	//   KV cache                      90.000 GiB  640 slots × 4096 positions × 36 layers × K and V × 256, bf16
	//   rollout step activations       7.278 GiB  66176 tokens per step (each group's leader prefills while the rest decode), logits of 640 rows
	//   activations                    3.533 GiB  training micro-batch of 16384 tokens, recomputation (on by itself: saved layers would exceed 1 GiB), in groups of sequences (≤ 4128 tokens) (residual stream and layer activations in bf16, statistics and gradients fp32)
	//   device scratch                 0.253 GiB  the CUDA device's own buffers at 66176 tokens: cuBLAS workspace, LM-head logit chunks, bf16-rounded matmul operands
	//   workspace                      0.500 GiB  CUDA context, kernels and cuBLAS workspace (estimate)
	//   total                        159.602 GiB  of 80.000 GiB on the device: does NOT fit
	// dry run: the plan does NOT fit
	// to fit, set rollout.slots=115
	//
	// memory plan: qwen2, 36 layers, hidden 2048, 3.09B parameters on cuda (bf16-mixed)
	//   weights                        5.748 GiB  3085938688 parameters × 2 B, the bf16 compute copy (Device.UseBF16)
	//   master weights                11.496 GiB  the fp32 arena the optimizer updates
	//   gradients                     11.496 GiB  fp32, one arena
	//   optimizer state               22.992 GiB  AdamW first and second moments, fp32
	//   reference policy               6.305 GiB  frozen (no gradients), bf16 weights only (cuda AllocBF16: fp32 sources rounded once at load), plus scoring activations at 16384 tokens, in groups of sequences (≤ 4128 tokens)
	//   KV cache                      16.172 GiB  115 slots × 4096 positions × 36 layers × K and V × 256, bf16
	//   rollout step activations       1.308 GiB  11891 tokens per step (each group's leader prefills while the rest decode), logits of 115 rows
	//   activations                    3.533 GiB  training micro-batch of 16384 tokens, recomputation (on by itself: saved layers would exceed 1 GiB), in groups of sequences (≤ 4128 tokens) (residual stream and layer activations in bf16, statistics and gradients fp32)
	//   device scratch                 0.247 GiB  the CUDA device's own buffers at 16384 tokens: cuBLAS workspace, LM-head logit chunks, bf16-rounded matmul operands
	//   workspace                      0.500 GiB  CUDA context, kernels and cuBLAS workspace (estimate)
	//   total                         79.797 GiB  of 80.000 GiB on the device: fits
	// dry run: the plan fits
}
