package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// trainConfig is a small Qwen2 shape for the train-step and decode sections.
type trainConfig struct {
	name             string
	C, L, NH, KVH, I int
	V, seqs, seqlen  int
	steps            int // decode steps (0: the decode section's default)
}

var trainConfigs = []trainConfig{
	{name: "qwen2-4M", C: 256, L: 4, NH: 4, KVH: 2, I: 704, V: 2048, seqs: 4, seqlen: 512},
	{name: "qwen2-27M", C: 512, L: 8, NH: 8, KVH: 2, I: 1408, V: 8192, seqs: 4, seqlen: 512},
}

// decodeConfigs are the decode section's models: the training shapes and
// Qwen2.5-0.5B's shapes (random weights, 16 steps).
var decodeConfigs = append(trainConfigs[:len(trainConfigs):len(trainConfigs)],
	trainConfig{name: "qwen2.5-0.5b-shape", C: 896, L: 24, NH: 14, KVH: 2, I: 4864, V: 151936, steps: 16})

func (c trainConfig) model() (*model.Model, error) {
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": %d,
		"intermediate_size": %d, "num_hidden_layers": %d, "num_attention_heads": %d,
		"num_key_value_heads": %d, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"max_position_embeddings": 32768, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`,
		c.C, c.I, c.L, c.NH, c.KVH, c.V)
	cfg, err := model.ParseConfig([]byte(raw), c.name)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, cpu.New(), model.LMHeadOutput)
	if err != nil {
		return nil, err
	}
	m.InitRandom(1)
	return m, nil
}

// trainSection times forward + backward (d/dlogprob = d/dentropy = 1, the
// gradient of Σ logprob + Σ entropy) of packed sequences, beside the same
// model and loss in PyTorch (train_step.py) on the same threads.
func trainSection(e *env) []row {
	var rows []row
	for _, c := range trainConfigs {
		m, err := c.model()
		if err != nil {
			rows = append(rows, row{section: "train", name: c.name, note: err.Error()})
			continue
		}
		b := model.Batch{Seqs: []int32{0}}
		for s := 0; s < c.seqs; s++ {
			for i := 0; i < c.seqlen; i++ {
				b.Tokens = append(b.Tokens, int32((s*7919+i*104729)%c.V))
			}
			b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
		}
		ones := make([]float32, len(b.Tokens))
		for i := range ones {
			ones[i] = 1
		}
		step := func() error {
			if _, err := m.Forward(b, true); err != nil {
				return err
			}
			return m.Backward(ones, ones, nil)
		}
		best, err := bestOf(e.reps, step)
		if err != nil {
			rows = append(rows, row{section: "train", name: c.name, note: err.Error()})
			continue
		}
		tokens := float64(len(b.Tokens))
		flops := 6 * float64(m.NumParams()) * tokens // matmul work, attention aside
		r := row{section: "train", name: fmt.Sprintf("%s fwd+bwd %d×%d tokens", c.name, c.seqs, c.seqlen),
			value: tokens / best, unit: "tok/s",
			ratios: []ratio{{"FMA peak", flops / best / 1e9 / e.fmaPeak(probe.BestISA())}}}
		torchSec, terr := torchStep(c, e)
		if terr != nil {
			r.note = "PyTorch peer: " + terr.Error()
		} else {
			r.ratios = append(r.ratios, ratio{"PyTorch time (lower is better)", best / torchSec})
			r.note = fmt.Sprintf("r1go %.3f s, PyTorch %.3f s per step", best, torchSec)
		}
		fmt.Println(r)
		rows = append(rows, r)
		runtime.GC()
	}
	return rows
}

// bestOf runs fn once to warm up, then reps times, and returns the best
// wall time in seconds.
func bestOf(reps int, fn func() error) (float64, error) {
	if err := fn(); err != nil {
		return 0, err
	}
	best := 1e300
	for i := 0; i < reps; i++ {
		t0 := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		best = min(best, time.Since(t0).Seconds())
	}
	return best, nil
}

// torchStep runs train_step.py with Debian's python3-torch.
func torchStep(c trainConfig, e *env) (float64, error) {
	args, _ := json.Marshal(map[string]int{"C": c.C, "L": c.L, "NH": c.NH, "KVH": c.KVH, "I": c.I, "V": c.V,
		"seqs": c.seqs, "seqlen": c.seqlen, "reps": e.reps, "threads": e.threads})
	out, err := exec.Command(pythonWithTorch(), filepath.Join(benchDir(), "train_step.py"), string(args)).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return 0, fmt.Errorf("%v: %s", err, lastLine(string(ee.Stderr)))
		}
		return 0, err
	}
	var res struct{ Seconds float64 }
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("unreadable output %q: %v", out, err)
	}
	return res.Seconds, nil
}
