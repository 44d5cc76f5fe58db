package cuda

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/safetensors"
	"github.com/r1go/r1go/optim"
)

// LoRA adapters on the GPU: the PEFT fixtures of model/testdata/lora
// (forward and every adapter gradient against PyTorch's float64, with and
// without dropout), and a few training steps against the CPU device.

// TestGPULoRAGoldenPyTorch loads each golden base frozen on the GPU,
// attaches its PEFT adapter folder and checks logprob, entropy and every
// lora_A/lora_B gradient against make_lora.py's values: without dropout,
// and with lora_dropout 0.3 and seed 7 (the masks are the CPU's hash, so
// the same elements drop on both devices). The dropout-free base view
// must give the base model's golden logprobs.
func TestGPULoRAGoldenPyTorch(t *testing.T) {
	gpu := gpuOrSkip(t)
	dir := goldenDir(t)
	loraDir := filepath.Join(dir, "..", "lora")
	for _, name := range []string{"qwen2_tied", "qwen2_untied"} {
		for _, dropout := range []float64{0, 0.3} {
			for _, recompute := range []bool{false, true} {
				raw, err := os.ReadFile(filepath.Join(dir, name+".inputs.json"))
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
				m, err := model.LoadWith(filepath.Join(dir, name), gpu, model.LMHeadOutput, model.LoadOptions{Frozen: true})
				if err != nil {
					t.Fatal(err)
				}
				lo, err := m.LoadAdapter(filepath.Join(loraDir, name+"_adapter"))
				if err != nil {
					t.Fatal(err)
				}
				lo.Config.Dropout, lo.Seed = dropout, 7
				m.Recompute = recompute
				file := name + ".lora_golden.safetensors"
				if dropout > 0 {
					file = name + ".lora_dropout_golden.safetensors"
				}
				gf, err := safetensors.Open(filepath.Join(loraDir, file))
				if err != nil {
					t.Fatal(err)
				}
				read := func(f *safetensors.File, n string) []float32 {
					info, ok := f.Info(n)
					if !ok {
						t.Fatalf("golden tensor %s missing", n)
					}
					v := make([]float32, info.NumElements())
					if err := f.ReadF32(n, v); err != nil {
						t.Fatal(err)
					}
					return v
				}
				check := func(what string, got, want []float32) {
					t.Helper()
					if e := relErr(got, want); !(e <= 1e-4) {
						t.Errorf("%s dropout %v recompute %v: %s relative error %.3g > 1e-4", name, dropout, recompute, what, e)
					}
				}
				b := model.Batch{Tokens: in.Tokens, Seqs: seqs}
				out, err := m.Forward(b, true)
				if err != nil {
					t.Fatal(err)
				}
				check("logprob", out.LogProb, read(gf, "logprob"))
				check("entropy", out.Entropy, read(gf, "entropy"))
				m.ZeroGrads()
				if err := m.Backward(in.A, in.B, nil); err != nil {
					t.Fatal(err)
				}
				grads := download(gpu, lo.Grads)
				off := 0
				for _, ts := range lo.Tensors() {
					n := ts.Shape[0] * ts.Shape[1]
					check("grad "+ts.Name, grads[off:off+n], read(gf, "grad."+ts.Name))
					off += n
				}
				gf.Close()
				bout, err := m.Base().Forward(b, false)
				if err != nil {
					t.Fatal(err)
				}
				bf, err := safetensors.Open(filepath.Join(dir, name+".golden.safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				check("base logprob", bout.LogProb, read(bf, "logprob"))
				bf.Close()
				gpu.Free(m.Params)
				gpu.Free(lo.Params)
				gpu.Free(lo.Grads)
			}
		}
	}
}

// TestGPULoRATrainingTracksCPU trains fresh rank-8 adapters (dropout 0.1)
// on a frozen tiny Qwen2 for five AdamW steps through package optim on
// both devices from the same base and the same initial adapters; the
// first step's adapter gradients and every step's loss must agree. (The
// weights after several Adam steps are not compared element by element:
// Adam normalises each coordinate, so a coordinate whose gradient is near
// zero moves by ±lr on either device.)
func TestGPULoRATrainingTracksCPU(t *testing.T) {
	checkLoRATraining(t, gpuOrSkip(t), false, 1e-4, 1e-4)
}

// TestGPULoRAMixedTracksCPU is the same on a Device in mixed precision,
// as cmd/train runs adapters on the GPU (useMixed: the frozen base's bf16
// copy): the layers' activations are bf16 (the adapters read bf16 inputs
// and add into a bf16 qkv and gate|up), the adapters' float32 weights are
// rounded on their way into each matmul. The tolerances are the mixed
// training test's 1e-2 on the loss and the LM head backward's 2^−5 on the
// first step's adapter gradients.
func TestGPULoRAMixedTracksCPU(t *testing.T) {
	e := newMixedEnv(t)
	checkLoRATraining(t, e.gpu, true, 1e-2, 1.0/32)
}

func checkLoRATraining(t *testing.T, gpu *Device, mixed bool, lossTol, gradTol float64) {
	cfg := tinyQwen(t)
	devs := []model.Device{cpu.New(), gpu}
	var models []*model.Model
	var opts []*optim.AdamW
	for _, d := range devs {
		m, err := model.NewWith(cfg, d, model.LMHeadOutput, model.LoadOptions{Frozen: true})
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(11)
		if mixed && d == model.Device(gpu) {
			gpu.UseBF16(m.Params)
		}
		lc := model.LoRAConfig{Rank: 8, Alpha: 16, Dropout: 0.1, TargetModules: []string{"all-linear"}}
		if _, err := m.AttachLoRA(lc, 3); err != nil {
			t.Fatal(err)
		}
		p, g := m.Trainable()
		oc := optim.DefaultConfig()
		oc.LR = 1e-3
		o, err := optim.New(d, p, g, oc, 5)
		if err != nil {
			t.Fatal(err)
		}
		models, opts = append(models, m), append(opts, o)
	}
	seqs := []int32{0, 20, 21, 45, 64}
	tokens := make([]int32, 64)
	for i := range tokens {
		tokens[i] = int32((i*7919 + 13) % cfg.VocabSize)
	}
	b := model.Batch{Tokens: tokens, Seqs: seqs}
	var first, last float64
	for step := 1; step <= 5; step++ {
		var losses [2]float64
		var grads [2][]float32
		for k, m := range models {
			m.Recompute = step%2 == 0
			out, err := m.Forward(b, true)
			if err != nil {
				t.Fatal(err)
			}
			dlp := make([]float32, len(tokens))
			n := float64(len(tokens) - (len(seqs) - 1))
			for i, lp := range out.LogProb {
				losses[k] -= float64(lp) / n
				dlp[i] = float32(-1 / n)
			}
			m.ZeroGrads()
			if err := m.Backward(dlp, nil, nil); err != nil {
				t.Fatal(err)
			}
			grads[k] = download(m.Dev, m.Adapters().Grads)
			if r := opts[k].Step(1); r.Skipped {
				t.Fatalf("step %d: update skipped (gradient norm %v)", step, r.GradNorm)
			}
			if err := m.Dev.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("step %d: loss CPU %.6f GPU %.6f", step, losses[0], losses[1])
		if step == 1 {
			first = losses[1]
		}
		last = losses[1]
		if e := relErr(grads[1], grads[0]); step == 1 && !(e <= gradTol) {
			t.Errorf("step 1: GPU adapter gradients differ from the CPU's by %.3g relative", e)
		} else if step == 1 {
			t.Logf("step 1: adapter gradients relative error %.3g (bound %.3g)", e, gradTol)
		}
		if d := math.Abs(losses[1] - losses[0]); !(d <= lossTol*math.Abs(losses[0])) {
			t.Errorf("step %d: GPU loss %.6f, CPU %.6f", step, losses[1], losses[0])
		}
	}
	// The adapters trained: B started at zero, the loss fell.
	cpuA := download(devs[0], models[0].Adapters().Params)
	moved := 0.0
	for _, v := range cpuA {
		moved = math.Max(moved, math.Abs(float64(v)))
	}
	if moved == 0 || !(last < first) {
		t.Errorf("the adapters did not train: loss %.6f → %.6f", first, last)
	}
}
