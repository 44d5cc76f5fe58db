package plan_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// The plan of Agent-R1's Table 3 GRPO run with Qwen2.5-3B on one 80 GB
// card: 128 prompts × 5 samples (640 rollout slots), responses ≤ 500
// tokens, context ≤ 4096 (prompts ≤ 512), the KL loss's reference policy,
// micro-batches of 16384 tokens. In fp32 (the CUDA device today) the
// weights, gradients, AdamW and reference alone exceed the card; in bf16
// mixed precision it fits once the rollout slots shrink.
func Example_table3() {
	cfg, err := model.LoadConfig(filepath.Join("..", "testdata", "config_qwen2.5-3b.json"))
	if err != nil {
		panic(err)
	}
	for _, precision := range []string{"fp32", "bf16-mixed"} {
		s := plan.Settings{Device: "cuda", Capacity: 80 << 30, Precision: precision, Train: true, Reference: true,
			MicroBatchTokens: 16384, RolloutSlots: 640, MaxContext: 4096, MaxPromptTokens: 512, GroupSize: 5}
		p, err := plan.New(cfg, s)
		if err != nil {
			panic(err)
		}
		if _, err := plan.Report(os.Stdout, p, cfg, true); err != nil {
			panic(err)
		}
		fmt.Println()
	}
	// Output:
	// memory plan: qwen2, 36 layers, hidden 2048, 3.09B parameters on cuda (fp32)
	//   weights                       11.496 GiB  3085938688 parameters × 4 B
	//   master weights                 0.000 GiB  none: the weights are fp32
	//   gradients                     11.496 GiB  fp32, one arena (model.New allocates it for every model)
	//   optimizer state               22.992 GiB  AdamW first and second moments, fp32
	//   reference policy              33.087 GiB  weights and the gradient arena model.New allocates, plus scoring activations at 16384 tokens
	//   KV cache                     180.000 GiB  640 slots × 4096 positions × 36 layers × K and V × 256
	//   rollout step activations      41.138 GiB  66176 tokens per step (each group's leader prefills while the rest decode), logits of 640 rows
	//   activations                  103.649 GiB  training micro-batch of 16384 tokens, every layer's activations saved
	//   workspace                      0.500 GiB  CUDA context, kernels and cuBLAS workspace (estimate)
	//   total                        404.359 GiB  of 80.000 GiB on the device: does NOT fit
	// dry run: the plan does NOT fit
	// to fit, set trainer.recompute=true actor.micro_batch_tokens=4096 trainer.rollout_slots=15
	//
	// memory plan: qwen2, 36 layers, hidden 2048, 3.09B parameters on cuda (bf16-mixed)
	//   weights                        5.748 GiB  3085938688 parameters × 2 B
	//   master weights                11.496 GiB  fp32 copy for the optimizer
	//   gradients                     11.496 GiB  fp32, one arena (model.New allocates it for every model)
	//   optimizer state               22.992 GiB  AdamW first and second moments, fp32
	//   reference policy              10.796 GiB  frozen weights, plus scoring activations at 16384 tokens
	//   KV cache                      90.000 GiB  640 slots × 4096 positions × 36 layers × K and V × 256
	//   rollout step activations      20.750 GiB  66176 tokens per step (each group's leader prefills while the rest decode), logits of 640 rows
	//   activations                   51.825 GiB  training micro-batch of 16384 tokens, every layer's activations saved
	//   workspace                      0.500 GiB  CUDA context, kernels and cuBLAS workspace (estimate)
	//   total                        225.603 GiB  of 80.000 GiB on the device: does NOT fit
	// dry run: the plan does NOT fit
	// to fit, set trainer.recompute=true actor.micro_batch_tokens=4096 trainer.rollout_slots=110
}
