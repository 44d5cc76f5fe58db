package model

import (
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/r1go/r1go/internal/pool"
)

// Draw is one token to draw by SampleAll: its row of logits, its sampling
// and its own random stream. SampleAll sets ID and LogProb to what
// SampleToken(Row, S, Rng, …) returns, drawing from Rng exactly as it does.
type Draw struct {
	Row     []float32
	S       Sampling
	Rng     *rand.Rand
	ID      int32
	LogProb float32
}

// groupCost is what a group of eight rows costs against one row drawn
// alone. The group saves each row's scalar loop of arguments and its
// in-order sum (a chain of dependent additions), about half of a draw,
// and spends a lane's exponentials whether the lane holds a row or not.
// BenchmarkSampleAll on this project's Zen 4, one thread: 0.41 ms a row
// alone, 1.63 ms a group of eight (0.20 ms a row).
const groupCost = 4

// groupable says whether d's first pass can run in a group: a draw at a
// temperature above 0 over the whole vocabulary (no top-k, no top-p cut),
// where the CPU has the eight-row kernel.
func groupable(d *Draw) bool {
	return sumExps8Vector && !expNoVector && d.S.Temperature > 0 && d.S.TopP >= 1 &&
		(d.S.TopK <= 0 || d.S.TopK >= len(d.Row)) && len(d.Row) >= 8
}

// SampleAll draws every d in draws, the work spread over GOMAXPROCS
// goroutines. Draws that sample the whole vocabulary at a temperature
// take their first pass (the sum of exponentials) eight rows at a time
// (sumExps8AVX512), where that finishes sooner than a row at a time on
// every core; each draw's token, log-probability and use of its stream are
// SampleToken's, bit for bit (TestSampleAllSameAsSampleToken). Rows may be
// shared between draws; each Rng must belong to one draw.
func SampleAll(draws []Draw) {
	workers := runtime.GOMAXPROCS(0)
	units := planDraws(draws, workers)
	workers = min(workers, len(units))
	scratch := make([][]int32, workers)
	pool.ForWorker(workers, len(units), func(w, k int) {
		if u := units[k]; u.group {
			sampleGroup(draws, u.draws, &scratch[w])
		} else {
			d := &draws[u.draws[0]]
			d.ID, d.LogProb = SampleToken(d.Row, d.S, d.Rng, &scratch[w])
		}
	})
}

// sampleUnit is a unit of SampleAll's work: a group of draws for
// sampleGroup, or one draw.
type sampleUnit struct {
	draws []int
	group bool
}

// planDraws splits draws into units for workers goroutines: groups of up
// to eight groupable draws of one row length when groups finish sooner
// (groupCost), the rest one by one, the groups first (the longest units).
func planDraws(draws []Draw, workers int) []sampleUnit {
	var units, singles []sampleUnit
	var open []int // the group being filled
	n := 0
	for i := range draws {
		if groupable(&draws[i]) {
			n++
		}
	}
	grouped := n >= 2 && ceilDiv(ceilDiv(n, 8), workers)*groupCost < ceilDiv(n, workers)
	closeGroup := func() {
		if len(open) < groupCost { // cheaper one by one
			for _, i := range open {
				singles = append(singles, sampleUnit{draws: []int{i}})
			}
		} else {
			units = append(units, sampleUnit{draws: open, group: true})
		}
		open = nil
	}
	for i := range draws {
		d := &draws[i]
		if !grouped || !groupable(d) {
			singles = append(singles, sampleUnit{draws: []int{i}})
			continue
		}
		if len(open) > 0 && (len(open) == 8 || len(draws[open[0]].Row) != len(d.Row)) {
			closeGroup()
		}
		open = append(open, i)
	}
	closeGroup()
	units = append(units, singles...)
	return units
}

// sampleGroup draws the draws g (up to eight, rows of one length) with one
// first pass, sumExpsGroup; a lane out of the kernel's range sends every
// draw of the group to SampleToken, whose sumExps handles it.
func sampleGroup(draws []Draw, g []int, scratch *[]int32) {
	V := len(draws[g[0]].Row)
	blocks := numBlocks(V)
	sc := getScratch(2*SampleBlock + len(g)*blocks)
	defer putScratch(sc)
	arg, ex, starts := (*sc)[:SampleBlock], (*sc)[SampleBlock:2*SampleBlock], (*sc)[2*SampleBlock:]
	var (
		rows          [8][]float32
		invT, m, sums [8]float64
		best          [8]int
	)
	for lane, i := range g {
		d := &draws[i]
		rows[lane], best[lane], invT[lane] = d.Row, ArgMax(d.Row), 1/d.S.Temperature
		m[lane] = float64(d.Row[best[lane]]) * invT[lane]
	}
	special := sumExpsGroup(rows[:len(g)], &invT, &m, &sums, starts)
	for lane, i := range g {
		d := &draws[i]
		if special {
			d.ID, d.LogProb = SampleToken(d.Row, d.S, d.Rng, scratch)
			continue
		}
		d.ID, d.LogProb = drawToken(d.Row, d.S, d.Rng, scratch, best[lane], invT[lane], m[lane], sums[lane], starts[lane*blocks:(lane+1)*blocks], arg, ex)
	}
}

// sumExpsGroup is sumExps for up to eight rows of one length at once
// (sumExps8AVX512, lanes past len(rows) repeating the last row): sums[i]
// gets row i's sum and starts[i·blocks+b] its running sum at block b's
// start, with sumExps's bits, unless it reports a value outside the
// kernel's range (then the sums are garbage).
func sumExpsGroup(rows [][]float32, invT, m, sums *[8]float64, starts []float64) (special bool) {
	V := len(rows[0])
	blocks := numBlocks(V)
	var ptrs [8]*float32
	for lane := range 8 {
		r := min(lane, len(rows)-1)
		ptrs[lane] = &rows[r][0]
		invT[lane], m[lane] = invT[r], m[r]
	}
	*sums = [8]float64{}
	for b := range blocks {
		for lane := range rows {
			starts[lane*blocks+b] = sums[lane]
		}
		i0 := b * SampleBlock
		n := min(SampleBlock, V-i0)
		n8 := n / 8 * 8
		if n8 > 0 && sumExps8AVX512(&ptrs, i0, n8, invT, m, sums) {
			return true
		}
		// The block's last columns a row at a time: math.Exp has the
		// kernel's bits wherever the kernel computes.
		for lane, row := range rows {
			for j := i0 + n8; j < i0+n; j++ {
				sums[lane] += math.Exp(float64(row[j])*invT[lane] - m[lane])
			}
		}
	}
	return false
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }
