package main

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/r1go/r1go/cuda"
)

// TestSmokeSections runs every section at smoke sizes on whatever CUDA
// device opens (the host emulator in CI's cuda step, a GPU elsewhere) and
// checks that each writes the keys the speed table pairs with
// transformers_bench.py's (benchmarks/gpu/README.md), as positive finite
// figures. It skips where no device opens, unless R1GO_EMU_STRICT=1.
func TestSmokeSections(t *testing.T) {
	g, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		if os.Getenv("R1GO_EMU_STRICT") == "1" {
			t.Fatalf("R1GO_EMU_STRICT=1 but no CUDA device: %v", err)
		}
		t.Skip("no CUDA device:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	useSmokeSizes()
	positive := func(what string, v any) {
		t.Helper()
		x, ok := v.(float64)
		if !ok || !(x > 0) || math.IsInf(x, 0) {
			t.Errorf("%s = %v, want a positive finite number", what, v)
		}
	}
	for _, sec := range []string{"train", "decode", "rl"} {
		r, err := run(sec, shapes["smoke"], 1)
		if err != nil {
			t.Fatalf("%s: %v", sec, err)
		}
		switch sec {
		case "train":
			positive("train step_s", r["step_s"])
			positive("train packed4_step_s", r["packed4_step_s"])
			for _, k := range []string{"phases_s", "packed4_phases_s"} {
				ph, _ := r[k].(map[string]float64)
				for _, p := range []string{"forward", "backward", "adamw"} {
					positive("train "+k+" "+p, ph[p])
				}
			}
		case "decode":
			for _, c := range []string{"b1", "b256"} {
				row, _ := r[c].(map[string]any)
				positive("decode "+c+" tok_s", row["tok_s"])
			}
		case "rl":
			positive("rl throughput_tok_s", r["throughput_tok_s"])
			ph, _ := r["phases_s"].(map[string]float64)
			for _, k := range []string{"gen", "old_log_prob", "ref", "update_actor"} {
				positive("rl phase "+k, ph[k])
			}
		}
	}
}
