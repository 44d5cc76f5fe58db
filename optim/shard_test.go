package optim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model/cpu"
)

// TestShardsEqualWhole splits one arena into two interleaved shards, steps
// them with the whole arena's norm, and checks weights, the gathered file
// and a reload against the whole-arena optimizer, for float32 and
// bfloat16 moments; each shard allocates only its own moments.
func TestShardsEqualWhole(t *testing.T) {
	for _, dtype := range []string{"float32", "bfloat16"} {
		dev := cpu.New()
		const n = 103
		cfg := DefaultConfig()
		cfg.LR, cfg.GradClip, cfg.StateDType = 0.01, 0.5, dtype
		init, grad := make([]float32, n), make([]float32, n)
		for i := range init {
			init[i] = float32(math.Sin(float64(i)))
		}
		pw, g := dev.Alloc(n), dev.Alloc(n)
		ps := dev.Alloc(n) // the shards' weights
		dev.Upload(pw, init)
		dev.Upload(ps, init)
		whole, err := New(dev, pw, g, cfg, 10)
		if err != nil {
			t.Fatal(err)
		}
		spans := [2][]Span{{{0, 20}, {40, 30}, {100, 3}}, {{20, 20}, {70, 30}}}
		var shards [2]*AdamW
		for r := range shards {
			if shards[r], err = NewShard(dev, ps, g, spans[r], cfg, 10); err != nil {
				t.Fatal(err)
			}
		}
		if shards[0].m.Len() != 53 || shards[1].m.Len() != 50 {
			t.Fatalf("%s: shard moments of %d and %d values, want 53 and 50", dtype, shards[0].m.Len(), shards[1].m.Len())
		}
		for s := range 4 {
			for i := range grad {
				grad[i] = float32(math.Cos(float64(i*s+1))) * 0.1
			}
			dev.Upload(g, grad)
			want := whole.Step(1)
			sum := shards[0].GradSumSquares() + shards[1].GradSumSquares()
			for _, o := range shards {
				if got := o.StepNorm(1, math.Sqrt(sum)); got.LR != want.LR || math.Abs(got.GradNorm-want.GradNorm) > 1e-12 {
					t.Fatalf("%s step %d: shard %+v, whole %+v", dtype, s, got, want)
				}
			}
		}
		a, b := make([]float32, n), make([]float32, n)
		dev.Download(a, pw)
		dev.Download(b, ps)
		for i := range a {
			// bf16 moments round stochastically, with random bits that depend
			// on the buffer an update is given, so
			// only float32 shards are bit-exact.
			if dtype == "float32" && a[i] != b[i] || math.Abs(float64(a[i]-b[i])) > 1e-3 {
				t.Fatalf("%s: weight %d is %v sharded, %v whole", dtype, i, b[i], a[i])
			}
		}
		dir := t.TempDir()
		wp, sp := filepath.Join(dir, "whole"), filepath.Join(dir, "shards")
		if err := whole.Save(wp); err != nil {
			t.Fatal(err)
		}
		if err := shards[0].Save(sp); err == nil {
			t.Fatalf("%s: a shard saved itself as the whole state", dtype)
		}
		if err := shards[0].SaveShards(sp, []Shard{shards[0].Shard(), shards[1].Shard()}); err != nil {
			t.Fatal(err)
		}
		if err := shards[0].SaveShards(filepath.Join(dir, "half"), []Shard{shards[0].Shard()}); err == nil {
			t.Fatalf("%s: one shard of two saved as the whole state", dtype)
		}
		if dtype == "float32" {
			wb, _ := os.ReadFile(wp)
			sb, _ := os.ReadFile(sp)
			if !bytes.Equal(wb, sb) {
				t.Fatalf("the shards' file differs from the whole optimizer's")
			}
		}
		// Reloaded, a shard of another layout holds the file's values.
		re, err := NewShard(dev, ps, g, []Span{{10, 50}}, cfg, 10)
		if err != nil {
			t.Fatal(err)
		}
		if err := re.Load(sp); err != nil {
			t.Fatal(err)
		}
		w2, err := New(dev, pw, g, cfg, 10)
		if err != nil {
			t.Fatal(err)
		}
		if err := w2.Load(sp); err != nil {
			t.Fatal(err)
		}
		full, got := w2.Shard(), re.Shard()
		es := len(full.M) / n
		if re.Steps() != 4 || !bytes.Equal(got.M, full.M[10*es:60*es]) || !bytes.Equal(got.V, full.V[10*es:60*es]) {
			t.Fatalf("%s: the reloaded shard differs from the file's span", dtype)
		}
	}
	dev := cpu.New()
	p, g := dev.Alloc(10), dev.Alloc(10)
	for _, bad := range [][]Span{{{5, 3}, {4, 2}}, {{8, 3}}, {{0, -1}}} {
		if _, err := NewShard(dev, p, g, bad, DefaultConfig(), 1); err == nil {
			t.Errorf("spans %v accepted", bad)
		}
	}
}
