package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/model"
)

// decodeSection times single-stream decoding through the KV cache (a
// 32-token prompt, then one token per step) and divides the bytes one step
// must read (every weight once in float32, plus the KV cache so far) per
// second by the same-run read bandwidth of the probe: the share of the
// memory-bandwidth bound.
//
// Each model is decoded twice in the same run: with float32 weights and as a
// frozen bf16 copy (weights rounded to bf16, read by the bf16 dot kernel);
// the bf16 row's ratio to the float32 row is the speed-up of halving the
// bytes. The 0.5B-shaped model (Qwen2.5-0.5B's shapes, random weights) runs
// fewer steps: each reads 2 GB of float32 weights.
func decodeSection(e *env) []row {
	bw := probe.ReadBandwidth(256<<20, e.threads)
	fmt.Printf("probe    read bandwidth on %d threads: %.1f GB/s\n", e.threads, bw)
	var rows []row
	for _, c := range decodeConfigs {
		if e.match != nil && !e.match.MatchString(c.name) {
			continue
		}
		m32, err := c.model()
		if err != nil {
			rows = append(rows, row{section: "decode", name: c.name, note: err.Error()})
			continue
		}
		steps := 128
		if c.steps > 0 {
			steps = c.steps
		}
		var f32 float64
		for _, dtype := range []string{"float32", "bfloat16"} {
			m, per := m32, 4.0
			if dtype == "bfloat16" {
				if m, err = m32.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16"}); err != nil {
					rows = append(rows, row{section: "decode", name: c.name, note: err.Error()})
					break
				}
				per = 2
				m32 = nil // only the bf16 copy stays resident
				runtime.GC()
			}
			r, err := decodeRow(e, c, m, steps, per, bw)
			if err != nil {
				rows = append(rows, row{section: "decode", name: c.name + " " + dtype, note: err.Error()})
				break
			}
			r.name = fmt.Sprintf("%s %s batch 1, %d steps", c.name, dtype, steps)
			if dtype == "float32" {
				f32 = r.value
			} else if f32 > 0 {
				r.ratios = append(r.ratios, ratio{"float32 decode", r.value / f32})
			}
			fmt.Println(r)
			rows = append(rows, r)
		}
		runtime.GC()
	}
	return rows
}

// decodeRow times steps single-token decode steps after a 32-token prompt
// (the prefill subtracted) and divides the bytes a step reads (every weight
// once at per bytes, plus the KV cache so far) per second by the read
// bandwidth bw.
func decodeRow(e *env, c trainConfig, m *model.Model, steps int, per, bw float64) (row, error) {
	const prompt = 32
	cache := m.NewKVCache(1, prompt+steps+1)
	ids := make([]int32, prompt)
	for i := range ids {
		ids[i] = int32(i * 31 % c.V)
	}
	run := func() error {
		cache.Lens[0] = 0
		if _, err := m.Step(cache, []model.Chunk{{Slot: 0, Tokens: ids}}); err != nil {
			return err
		}
		for s := 0; s < steps; s++ {
			if _, err := m.Step(cache, []model.Chunk{{Slot: 0, Tokens: []int32{int32(s % c.V)}}}); err != nil {
				return err
			}
		}
		return nil
	}
	// Time the decode steps only: subtract a prefill-only run.
	prefill, err := bestOf(e.reps, func() error {
		cache.Lens[0] = 0
		_, err := m.Step(cache, []model.Chunk{{Slot: 0, Tokens: ids}})
		return err
	})
	if err != nil {
		return row{}, err
	}
	total, err := bestOf(e.reps, run)
	if err != nil {
		return row{}, err
	}
	perTok := (total - prefill) / float64(steps)
	kvBytes := float64(c.L*2*c.KVH*(c.C/c.NH)*4) * float64(prompt+steps/2)
	bytes := float64(m.NumParams())*per + kvBytes
	return row{section: "decode", value: 1 / perTok, unit: "tok/s",
		ratios: []ratio{{"read-bandwidth bound", bytes / perTok / 1e9 / bw}},
		note:   fmt.Sprintf("%.1f MB read per token", bytes/1e6)}, nil
}

// benchDir is the folder of this command's sources (peer scripts live there).
func benchDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "benchmarks/cpu"
	}
	return filepath.Dir(file)
}

// pythonWithTorch finds a Python that imports torch: Debian's python3-torch
// installs into /usr/bin/python3, which a pyenv shim may shadow.
func pythonWithTorch() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(p, "-c", "import torch").Run(); err == nil {
			return p
		}
	}
	fmt.Fprintln(os.Stderr, "cpu: no python3 with torch (apt-get install python3-torch libopenblas0-pthread)")
	return "python3"
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
