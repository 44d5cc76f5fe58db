package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// stepValues is a step's worth of metrics as a GRPO trainer logs them: about
// 60 names under verl's prefixes.
func stepValues() map[string]float64 {
	m := map[string]float64{}
	for i, p := range []string{"critic/score", "critic/rewards", "critic/advantages", "critic/returns",
		"response_length", "prompt_length", "num_turns", "tool_call_counts"} {
		AddSummary(m, p, []float64{float64(i) * 0.1, 0.5, 1.25})
	}
	for _, k := range []string{"actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy",
		"actor/kl_loss", "actor/grad_norm", "actor/lr"} {
		m[k] = 0.0123456789
	}
	for _, p := range []string{PhaseGen, PhaseOldLogProb, PhaseRef, PhaseAdv, PhaseUpdateActor, PhaseStep, PhaseTesting} {
		m["timing_s/"+p] = 12.3456
		m["timing_per_token_ms/"+p] = 0.0456
	}
	for i := 0; i < 10; i++ {
		m[fmt.Sprintf("val-aux/source%d/em/mean@1", i)] = 0.3333
	}
	return m
}

// BenchmarkLog measures one step's logging per sink. The denominator,
// "baseline", is encoding/json marshalling the same record plus one write to
// a file: the least a JSONL logger could do.
func BenchmarkLog(b *testing.B) {
	values := stepValues()
	dir := b.TempDir()
	b.Run("baseline", func(b *testing.B) {
		f, err := os.Create(filepath.Join(dir, "baseline.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := 0; b.Loop(); i++ {
			line, err := json.Marshal(struct {
				Step int                `json:"step"`
				Data map[string]float64 `json:"data"`
			}{i, values})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(append(line, '\n')); err != nil {
				b.Fatal(err)
			}
		}
	})
	sinks := map[string]func() Sink{
		"console": func() Sink { return NewConsole(io.Discard) },
		"jsonl": func() Sink {
			s, err := CreateJSONL(filepath.Join(dir, "m.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"tensorboard": func() Sink {
			s, err := CreateTensorBoard(filepath.Join(dir, "tb"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"console", "jsonl", "tensorboard"} {
		b.Run(name, func(b *testing.B) {
			log := New(sinks[name]())
			defer log.Close()
			for i := 0; b.Loop(); i++ {
				if err := log.Log(i, values); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
