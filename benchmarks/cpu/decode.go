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
func decodeSection(e *env) []row {
	bw := probe.ReadBandwidth(256<<20, e.threads)
	fmt.Printf("probe    read bandwidth on %d threads: %.1f GB/s\n", e.threads, bw)
	var rows []row
	for _, c := range trainConfigs {
		m, err := c.model()
		if err != nil {
			rows = append(rows, row{section: "decode", name: c.name, note: err.Error()})
			continue
		}
		const prompt, steps = 32, 128
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
		if err == nil {
			var total float64
			total, err = bestOf(e.reps, run)
			if err == nil {
				perTok := (total - prefill) / steps
				kvBytes := float64(c.L*2*c.KVH*(c.C/c.NH)*4) * float64(prompt+steps/2)
				bytes := float64(m.NumParams())*4 + kvBytes
				r := row{section: "decode", name: fmt.Sprintf("%s batch 1, %d steps", c.name, steps),
					value: 1 / perTok, unit: "tok/s",
					ratios: []ratio{{"read-bandwidth bound", bytes / perTok / 1e9 / bw}},
					note:   fmt.Sprintf("%.1f MB read per token", bytes/1e6)}
				fmt.Println(r)
				rows = append(rows, r)
			}
		}
		if err != nil {
			rows = append(rows, row{section: "decode", name: c.name, note: err.Error()})
		}
		runtime.GC()
	}
	return rows
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
