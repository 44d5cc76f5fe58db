package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/r1go/r1go/model"
)

// TestBlockSums32BitForBit: the vector kernel's block sums are the loop's
// bits, and together within 10⁻⁶ of the terms' sum, for rows of whole
// blocks, a short last block, a tail of fewer than sixteen, and a last
// block of only such a tail (over sums that held NaNs before), at
// temperatures 1 and 0.7, with logits far below the largest (terms that
// underflow to 0).
func TestBlockSums32BitForBit(t *testing.T) {
	if !sample32Vector {
		t.Skip("no float32 sampling kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	defer func() { expNoVector = false }()
	for _, n := range []int{16, 17, 1024, 1029, 1040, 2051, 3000, 151936} {
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 4)
			if rng.IntN(50) == 0 {
				row[i] = -200
			}
		}
		for _, invT := range []float32{1, 1 / float32(0.7)} {
			m := row[model.ArgMax(row)] * invT
			// Pooled rows come back holding old sums: start from NaNs.
			got, want := make([]float64, numBlocks(n)), make([]float64, numBlocks(n))
			for b := range got {
				got[b], want[b] = math.NaN(), math.NaN()
			}
			expNoVector = false
			blockSums32(row, invT, m, got)
			expNoVector = true
			blockSums32(row, invT, m, want)
			var total, ref float64
			for b := range got {
				if math.Float64bits(got[b]) != math.Float64bits(want[b]) {
					t.Fatalf("n=%d invT %v: block %d sums to %v, the loop %v", n, invT, b, got[b], want[b])
				}
				total += got[b]
			}
			for _, l := range row {
				ref += float64(exp32Arg(l, invT, m))
			}
			if !(math.Abs(total-ref) <= ref*1e-6) { // a NaN fails too
				t.Fatalf("n=%d invT %v: the blocks sum to %v, the terms to %v", n, invT, total, ref)
			}
		}
	}
}

// TestSample32AgainstSampleToken: over 3,000 draws from rows of a
// 151,936-token vocabulary (logits spread like a model's, one row nearly
// one-hot), each with its own stream, the float32 draw picks SampleToken's
// token (the same u from the same stream) in all but a handful, and its
// log-probability lies within 10⁻⁵ of SampleToken's; after the draw both
// streams are in the same place. Rows with a NaN or an infinity, and
// truncated or greedy draws, get SampleToken's results exactly.
func TestSample32AgainstSampleToken(t *testing.T) {
	const V, rows, perRow = 151936, 6, 500
	rng := rand.New(rand.NewPCG(9, 10))
	differ := 0
	var scratch []int32
	for r := 0; r < rows; r++ {
		row := make([]float32, V)
		scale := 2 + 3*float64(r)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * scale)
		}
		if r == rows-1 {
			row[123] = 60 // nearly all the mass on one token
		}
		for k := 0; k < perRow; k++ {
			T := []float64{1, 0.6, 1.3}[k%3]
			seed := uint64(r*perRow + k)
			a, b := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			id, lp, ok := sampleToken32(row, T, a)
			if !ok {
				t.Fatalf("row %d: the float32 draw declined a finite row", r)
			}
			wid, wlp := model.SampleToken(row, model.Sampling{Temperature: T, TopP: 1, TopK: -1}, b, &scratch)
			if id != wid {
				differ++
			} else if math.Abs(float64(lp-wlp)) > 1e-5 {
				t.Fatalf("row %d T %v: token %d log-probability %v, SampleToken's %v", r, T, id, lp, wlp)
			}
			if a.Uint64() != b.Uint64() {
				t.Fatalf("row %d draw %d: the streams part after the draw", r, k)
			}
		}
	}
	if differ > 3 {
		t.Errorf("%d of %d float32 draws picked another token than SampleToken", differ, rows*perRow)
	}
	t.Logf("%d of %d draws differ", differ, rows*perRow)

	// Rows the float32 pass leaves to SampleToken, and draws it does not take.
	row := make([]float32, 4096)
	for i := range row {
		row[i] = float32(i % 7)
	}
	for _, c := range []struct {
		name string
		set  func(r []float32)
		s    model.Sampling
	}{
		{"NaN", func(r []float32) { r[100] = float32(math.NaN()) }, model.Sampling{Temperature: 1, TopP: 1}},
		{"+Inf", func(r []float32) { r[7] = float32(math.Inf(1)) }, model.Sampling{Temperature: 1, TopP: 1}},
		{"top-p", func([]float32) {}, model.Sampling{Temperature: 1, TopP: 0.5}},
		{"top-k", func([]float32) {}, model.Sampling{Temperature: 1, TopP: 1, TopK: 3}},
		{"greedy", func([]float32) {}, model.Greedy},
	} {
		r := append([]float32(nil), row...)
		c.set(r)
		draws := []model.Draw{{Row: r, S: c.s, Rng: rand.New(rand.NewPCG(1, 2))}}
		sampleAll32(draws)
		wid, wlp := model.SampleToken(r, c.s, rand.New(rand.NewPCG(1, 2)), &scratch)
		if draws[0].ID != wid || math.Float32bits(draws[0].LogProb) != math.Float32bits(wlp) {
			t.Errorf("%s: token %d log-probability %v, SampleToken's %d %v", c.name, draws[0].ID, draws[0].LogProb, wid, wlp)
		}
	}
}

// TestDrawBlock32: the draw finds the first token whose running sum
// passes the target, the running sum being the block sums' prefix at
// each block's start and the terms added in order within the block, for
// targets at random, equal to running sums, just below and just above
// every block's start, and past the total (the row's last token with a
// term above 0).
func TestDrawBlock32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const V = 5000 // four whole blocks and a short one
	row := make([]float32, V)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 3)
	}
	for i := V - 40; i < V; i++ {
		row[i] = -1000 // a tail of zero terms
	}
	invT := float32(1)
	m := row[model.ArgMax(row)] * invT
	sums := make([]float64, numBlocks(V))
	blockSums32(row, invT, m, sums)
	want := func(target float64) int {
		start, last := 0.0, -1
		for b := range sums {
			run := start
			for i := b * model.SampleBlock; i < min((b+1)*model.SampleBlock, V); i++ {
				e := exp32Arg(row[i], invT, m)
				if e > 0 {
					last = i
				}
				if run += float64(e); run > target && (b == len(sums)-1 || start+sums[b] > target) {
					return i
				}
			}
			start += sums[b]
		}
		return last
	}
	var S float64
	targets := []float64{0}
	for _, s := range sums {
		targets = append(targets, S*(1-1e-12), S, S*(1+1e-12))
		S += s
	}
	targets = append(targets, S*0.999999, S, 2*S)
	for range 2000 {
		targets = append(targets, rng.Float64()*S)
	}
	// Running sums themselves: the draw needs a sum past the target, so
	// a target equal to token i's running sum picks a later token.
	start := 0.0
	for b := range sums {
		run := start
		for i := b * model.SampleBlock; i < min((b+1)*model.SampleBlock, V-40); i++ {
			run += float64(exp32Arg(row[i], invT, m))
			if i%97 == 0 {
				targets = append(targets, run)
			}
		}
		start += sums[b]
	}
	for _, target := range targets {
		if got, w := drawBlock32(row, invT, m, sums, target), want(target); got != w {
			t.Fatalf("target %v (of %v): token %d, want %d", target, S, got, w)
		}
	}
}

// TestSampleRowsStreams: SampleRows draws row j with a PCG stream seeded
// by seeds[j], by SampleAll for plain float32 logits and by sampleAll32
// for a rollout copy's (StoreEngineLogits), the same tokens and
// log-probabilities, bit for bit, as those functions over the same draws.
func TestSampleRowsStreams(t *testing.T) {
	d := New()
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, V = 5, 3000
	host := make([]float32, rows*V)
	for i := range host {
		host[i] = float32(4 * rng.NormFloat64())
	}
	seeds := []uint64{9, 1, 1, 77, 5}
	s := model.Sampling{Temperature: 0.8, TopP: 1, TopK: -1}
	engine, _ := model.AllocAs(d, rows*V, model.StoreEngineLogits)
	for _, c := range []struct {
		name   string
		logits model.Buffer
		want   func([]model.Draw)
	}{{"float32", d.Alloc(rows * V), model.SampleAll}, {"engine", engine, sampleAll32}} {
		d.Upload(c.logits, host)
		tokens, lps := make([]int32, rows), make([]float32, rows)
		if err := d.(model.Sampler).SampleRows(tokens, lps, c.logits, V, s, seeds); err != nil {
			t.Fatal(err)
		}
		draws := make([]model.Draw, rows)
		for j := range draws {
			draws[j] = model.Draw{Row: host[j*V : (j+1)*V], S: s, Rng: rand.New(rand.NewPCG(seeds[j], 0x5eed))}
		}
		c.want(draws)
		for j, dr := range draws {
			if tokens[j] != dr.ID || math.Float32bits(lps[j]) != math.Float32bits(dr.LogProb) {
				t.Errorf("%s row %d: token %d log-probability %v, want %d %v", c.name, j, tokens[j], lps[j], dr.ID, dr.LogProb)
			}
		}
	}
}
