package cuda

import (
	"testing"

	"github.com/r1go/r1go/model"
)

// plainDevice is a Device seen without MixedPrecision: the model keeps
// every gradient float32 on it, rounded by each matmul that reads it,
// while the ops themselves, the compute storage and the mixed precision
// are the Device's own.
type plainDevice struct {
	model.Device
	model.Storage
}

// TestGPUMixedStepRoundsOnce: a training forward and backward in mixed
// precision, the layers' gradients rounded once by their producers
// (model.MixedPrecision: SwiGLUBackward's bf16 dgu, RMSNormBackward's
// bf16 view of the residual gradient, dqkv's copy), against the same model
// on the same Device through plainDevice. Only the place of each rounding moves,
// so logprob, entropy and every gradient are the same bits. On a GPU the
// tensor-core attention's default backward (head size 64 here) adds dQ,
// dK and dV with atomics in an order of the GPU's, and a float32
// difference that crosses a bf16 rounding boundary moves a matmul input by
// one bf16 step: there the gradients need only agree within 2^−8 (relErr). Cases: whole, grouped with recomputation (the
// residual gradient's view spans the batch while the groups take turns),
// Qwen3's per-head norms, and LoRA adapters with dropout on a frozen base
// (the adapters read the gradient views). Without adapters, no matmul of
// the fused path may round a float32 operand at all: the device's
// "mixed-a" and "mixed-b" scratch must not exist after it.
func TestGPUMixedStepRoundsOnce(t *testing.T) {
	gpuOrSkip(t)
	for _, c := range []struct {
		name    string
		grouped bool
		lora    bool
		cfg     func(*testing.T) *model.Config
	}{{"whole", false, false, tinyQwen}, {"grouped", true, false, tinyQwen}, {"qwen3", false, false, tinyQwen3}, {"lora", false, true, tinyQwen}} {
		t.Run(c.name, func(t *testing.T) {
			if c.grouped {
				defer func(old int) { model.GroupBytes = old }(model.GroupBytes)
				model.GroupBytes = 1
			}
			g, err := OpenWith(Options{Ordinal: 0}) // fresh scratch
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			cfg := c.cfg(t)
			seqs := []int32{0, 40, 41, 97, 160}
			tokens := make([]int32, 160)
			for i := range tokens {
				tokens[i] = int32((i*7919 + 13) % cfg.VocabSize)
			}
			b := model.Batch{Tokens: tokens, Seqs: seqs}
			dlp, dent := make([]float32, len(tokens)), make([]float32, len(tokens))
			for i := range dlp {
				dlp[i] = float32(-1) / float32(len(tokens)) * float32(1+i%3)
				dent[i] = 0.01 * float32(i%5-2)
			}
			type result struct{ logprob, entropy, grads []float32 }
			run := func(dev model.Device) result {
				m, err := model.NewWith(cfg, dev, model.LMHeadOutput, model.LoadOptions{Frozen: c.lora})
				if err != nil {
					t.Fatal(err)
				}
				m.InitRandom(11)
				g.UseBF16(m.Params)
				m.Recompute = c.grouped
				if c.lora {
					lc := model.LoRAConfig{Rank: 8, Alpha: 16, Dropout: 0.1, TargetModules: []string{"all-linear"}}
					if _, err := m.AttachLoRA(lc, 3); err != nil {
						t.Fatal(err)
					}
				}
				out, err := m.Forward(b, true)
				if err != nil {
					t.Fatal(err)
				}
				m.ZeroGrads()
				if err := m.Backward(dlp, dent, nil); err != nil {
					t.Fatal(err)
				}
				_, grads := m.Trainable()
				return result{out.LogProb, out.Entropy, download(g, grads)}
			}
			fused := run(g)
			if !c.lora {
				for _, s := range []string{"mixed-a", "mixed-b"} {
					if _, ok := g.scratch[s]; ok {
						t.Errorf("the fused step rounded a float32 matmul operand into %q", s)
					}
				}
			}
			plain := run(plainDevice{g, g})
			if _, ok := g.scratch["mixed-a"]; !ok {
				t.Error("the plain step rounded no float32 matmul operand: it did not take the plain path")
			}
			sameBits(t, g, "logprob", fused.logprob, plain.logprob, 0)
			sameBits(t, g, "entropy", fused.entropy, plain.entropy, 0)
			sameBits(t, g, "gradients", fused.grads, plain.grads, 1.0/256)
			t.Logf("%d logprobs, %d entropies and %d gradients: the same bits", len(fused.logprob), len(fused.entropy), len(fused.grads))
		})
	}
}

// TestGPUBlasWorkspace: OpenWith hands cuBLAS a workspace of the Device's
// own, a live allocation of the size the GPU's generation asks for (the
// emulator reports sm_90: 32 MiB).
func TestGPUBlasWorkspace(t *testing.T) {
	g := gpuOrSkip(t)
	if blasWorkspaceBytes(9) != 32<<20 || blasWorkspaceBytes(10) != 32<<20 || blasWorkspaceBytes(8) != 4<<20 {
		t.Fatalf("workspace sizes %d (sm_8x), %d (sm_90), %d (sm_100)", blasWorkspaceBytes(8), blasWorkspaceBytes(9), blasWorkspaceBytes(10))
	}
	if g.blas.cublasSetWorkspace == 0 {
		t.Skip("this cuBLAS has no cublasSetWorkspace_v2")
	}
	want := blasWorkspaceBytes(g.major)
	if got := 4 * g.blasWS.n; got != want {
		t.Fatalf("workspace of %d bytes on sm_%d%d, want %d", got, g.major, g.minor, want)
	}
	if g.allocs[g.blasWS.ptr] < want {
		t.Fatalf("the workspace at %#x is not a live allocation of %d bytes", g.blasWS.ptr, want)
	}
}
