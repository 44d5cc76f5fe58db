package model

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// logitRow is a row of n logits of spread about 3·scale, with ties.
func logitRow(r *rand.Rand, n int, scale float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3 * scale)
		if r.IntN(50) == 0 {
			row[i] = row[max(i-1, 0)]
		}
	}
	return row
}

// TestSumExpsGroupSameBits compares the eight-row first pass with sumExps
// row by row: every row's sum and running sums at the block starts, bit
// for bit, for groups of 1 to 8 rows, lengths below, at and past the block
// and the kernel's width, and temperatures from 0.3 to 2. Rows whose
// arguments leave the kernel's range must be reported.
func TestSumExpsGroupSameBits(t *testing.T) {
	if !sumExps8Vector {
		t.Skip("no eight-row kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	lengths := []int{8, 9, 15, 64, 1023, 1024, 1031, 2048 + 13, 5000}
	for trial := range 60 {
		V := lengths[trial%len(lengths)]
		if trial == 59 {
			V = 151936
		}
		k := 1 + trial%8
		rows := make([][]float32, k)
		var invT, m [8]float64
		for i := range rows {
			rows[i] = logitRow(r, V, 0.5+r.Float64()*3)
			invT[i] = 1 / (0.3 + 1.7*r.Float64())
			m[i] = float64(rows[i][ArgMax(rows[i])]) * invT[i]
		}
		blocks := numBlocks(V)
		starts := make([]float64, k*blocks)
		var sums [8]float64
		if sumExpsGroup(rows, &invT, &m, &sums, starts) {
			t.Fatalf("trial %d: rows of spread %v reported out of range", trial, 9)
		}
		arg, ex, want := make([]float64, SampleBlock), make([]float64, SampleBlock), make([]float64, blocks)
		for i, row := range rows {
			s := sumExps(row, invT[i], m[i], arg, ex, want)
			if math.Float64bits(s) != math.Float64bits(sums[i]) {
				t.Fatalf("trial %d (V %d, %d rows): row %d sums to %v, sumExps %v", trial, V, k, i, sums[i], s)
			}
			for b := range blocks {
				if got := starts[i*blocks+b]; math.Float64bits(got) != math.Float64bits(want[b]) {
					t.Fatalf("trial %d: row %d block %d starts at %v, sumExps %v", trial, i, b, got, want[b])
				}
			}
		}
	}
	// Out of range: a logit 800 below the largest (exp underflows past
	// the kernel's branch), and a NaN.
	for _, bad := range []float32{-800, float32(math.NaN())} {
		rows := [][]float32{logitRow(r, 64, 1), logitRow(r, 64, 1)}
		rows[1][37] = bad
		invT, m := [8]float64{1, 1}, [8]float64{}
		for i, row := range rows {
			m[i] = float64(row[ArgMax(row)])
		}
		var sums [8]float64
		if !sumExpsGroup(rows, &invT, &m, &sums, make([]float64, 2)) {
			t.Fatalf("a logit of %v was not reported", bad)
		}
	}
}

// TestSampleAllSameAsSampleToken draws batches of 1 to 40 rows, with
// whole-vocabulary draws at several temperatures mixed with greedy, top-k
// and top-p draws, rows shared between draws, a row whose logits span more
// than the kernel's range and one with a NaN, each twice: by SampleAll and
// by SampleToken with an identical stream. Token, log-probability and the
// stream's next value must agree, on 1, 2 and 3 threads; the batches of 16
// and more on two threads must have taken the groups.
func TestSampleAllSameAsSampleToken(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const V = 3000
	samplings := []Sampling{
		{Temperature: 1, TopP: 1, TopK: -1}, {Temperature: 0.7, TopP: 1, TopK: 0}, {Temperature: 1.3, TopP: 1, TopK: V},
		Greedy, {Temperature: 1, TopP: 0.9, TopK: -1}, {Temperature: 1, TopP: 1, TopK: 20},
	}
	for _, procs := range []int{1, 2, 3} {
		old := runtime.GOMAXPROCS(procs)
		for n := 1; n <= 40; n++ {
			draws := make([]Draw, n)
			want := make([]Draw, n)
			for i := range draws {
				row := logitRow(r, V, 1)
				switch {
				case i > 0 && r.IntN(4) == 0:
					row = draws[i-1].Row // a follower's draw from its leader's row
				case n == 20 && i == 3:
					row[100] = row[ArgMax(row)] - 900
				case n == 21 && i == 5:
					row[7] = float32(math.NaN())
				}
				s := samplings[0]
				if r.IntN(3) == 0 {
					s = samplings[r.IntN(len(samplings))]
				}
				seed := r.Uint64()
				draws[i] = Draw{Row: row, S: s, Rng: rand.New(rand.NewPCG(seed, 1))}
				want[i] = Draw{Row: row, S: s, Rng: rand.New(rand.NewPCG(seed, 1))}
			}
			var scratch []int32
			for i := range want {
				want[i].ID, want[i].LogProb = SampleToken(want[i].Row, want[i].S, want[i].Rng, &scratch)
			}
			if procs == 2 && n >= 16 && sumExps8Vector {
				groups := 0
				for _, u := range planDraws(draws, 2) {
					if u.group {
						groups++
					}
				}
				if groups == 0 {
					t.Fatalf("%d draws on 2 threads: no group planned", n)
				}
			}
			SampleAll(draws)
			for i := range draws {
				g, w := draws[i], want[i]
				if g.ID != w.ID || math.Float32bits(g.LogProb) != math.Float32bits(w.LogProb) {
					t.Fatalf("%d threads, %d draws, draw %d (%+v): SampleAll %d (%v), SampleToken %d (%v)", procs, n, i, g.S, g.ID, g.LogProb, w.ID, w.LogProb)
				}
				if a, b := g.Rng.Uint64(), w.Rng.Uint64(); a != b {
					t.Fatalf("%d threads, %d draws, draw %d: the streams moved apart", procs, n, i)
				}
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

// BenchmarkSampleAll draws a decode step's 32 rows of Qwen2.5's 151,936
// logits at temperature 1, with SampleAll (groups of eight where they
// pay), a rollout copy's float32 pass (sampleAll32) and a row at a time
// (EachRow and SampleToken, as before).
func BenchmarkSampleAll(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, V = 32, 151936
	logits := make([][]float32, rows)
	for i := range logits {
		logits[i] = logitRow(r, V, 1)
	}
	s := Sampling{Temperature: 1, TopP: 1, TopK: -1}
	b.Run("grouped", func(b *testing.B) {
		draws := make([]Draw, rows)
		for b.Loop() {
			for i := range draws {
				draws[i] = Draw{Row: logits[i], S: s, Rng: rand.New(rand.NewPCG(uint64(i), 3))}
			}
			SampleAll(draws)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
	})
	b.Run("float32", func(b *testing.B) { // a rollout copy's (model/cpu's sample32.go)
		dev := NewCPU()
		all, ok := AllocAs(dev, rows*V, StoreEngineLogits)
		if !ok {
			b.Fatal("the CPU holds no StoreEngineLogits")
		}
		for i := range logits {
			dev.Upload(all.Slice(i*V, V), logits[i])
		}
		seeds := make([]uint64, rows)
		for i := range seeds {
			seeds[i] = uint64(i)
		}
		tokens, lps := make([]int32, rows), make([]float32, rows)
		for b.Loop() {
			if err := dev.(Sampler).SampleRows(tokens, lps, all, V, s, seeds); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
	})
	b.Run("row-by-row", func(b *testing.B) {
		for b.Loop() {
			EachRow(rows, func(j int, scratch *[]int32) {
				SampleToken(logits[j], s, rand.New(rand.NewPCG(uint64(j), 3)), scratch)
			})
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
	})
}
