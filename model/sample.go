package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"

	"github.com/r1go/r1go/internal/pool"
)

// Sampling chooses the next token from a row of logits.
type Sampling struct {
	Temperature float64 `yaml:"temperature" help:"sampling temperature; 0 is greedy"`
	TopP        float64 `yaml:"top_p" help:"nucleus sampling mass (1: off)"`
	TopK        int     `yaml:"top_k" help:"keep the k most likely tokens (-1 or 0: off)"`
}

// Greedy is argmax decoding, as verl validates (temperature 0).
var Greedy = Sampling{Temperature: 0, TopP: 1, TopK: -1}

// Validate reports parameters outside their range.
func (s Sampling) Validate() error {
	if !(s.Temperature >= 0) || math.IsInf(s.Temperature, 0) {
		return fmt.Errorf("model: temperature %v must be a finite number ≥ 0", s.Temperature)
	}
	if !(s.TopP > 0 && s.TopP <= 1) {
		return fmt.Errorf("model: top_p %v must lie in (0, 1]", s.TopP)
	}
	return nil
}

// EachRow calls f(j, scratch) for every j in [0, n), the rows split among
// GOMAXPROCS goroutines, each with its own scratch for SampleToken. A
// 151,936-token row costs about half a millisecond (a pass of exp and an
// in-order sum), so a batch of 32 rows drawn on one core would add over
// ten milliseconds to every decode step. f must touch only row j's state (its
// own random stream above all), so the draws do not depend on the split.
func EachRow(n int, f func(j int, scratch *[]int32)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	scratch := make([][]int32, workers)
	pool.ForWorker(workers, n, func(w, j int) { f(j, &scratch[w]) })
}

// ArgMax is the first index of the largest logit, as the loop
// "if v > logits[best] { best = i }" finds it: ties go to the lowest id,
// +0 and −0 tie, and a NaN never wins unless it is logits[0]. Sixteen at
// a time where the CPU can (a 151,936-entry row: 0.2 of a millisecond in
// the loop, a third of a draw); a row with a NaN takes the loop.
func ArgMax(logits []float32) int {
	if n16 := len(logits) / 16; argmaxVector && n16 > 0 {
		m, nan := maxAVX512(&logits[0], n16)
		for _, v := range logits[16*n16:] {
			nan = nan || v != v
			m = max(m, v)
		}
		if !nan {
			if i := firstEqualAVX512(&logits[0], n16, m); i >= 0 {
				return i
			}
			for i, v := range logits[16*n16:] {
				if v == m {
					return 16*n16 + i
				}
			}
		}
	}
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// RowMax is the largest logit, or false where the row holds a NaN: the
// value at argmax's index without the second pass that finds the index.
func RowMax(logits []float32) (float32, bool) {
	m, nan := float32(math.Inf(-1)), false
	tail := logits
	if n16 := len(logits) / 16; argmaxVector && n16 > 0 {
		m, nan = maxAVX512(&logits[0], n16)
		tail = logits[16*n16:]
	}
	for _, v := range tail {
		nan = nan || v != v
		m = max(m, v)
	}
	return m, !nan
}

// SampleBlock is how many logits SampleToken exponentiates at a time.
const SampleBlock = 1024

// sumExps is S = Σ exp(logit_i·invT − m) summed in order, with the
// running sum at each block's start in starts.
func sumExps(logits []float32, invT, m float64, arg, ex, starts []float64) float64 {
	var sum float64
	for i0 := 0; i0 < len(logits); i0 += SampleBlock {
		starts[i0/SampleBlock] = sum
		blk := logits[i0:min(i0+SampleBlock, len(logits))]
		for i, v := range blk {
			arg[i] = float64(v)*invT - m
		}
		exp64Into(ex[:len(blk)], arg[:len(blk)])
		for _, e := range ex[:len(blk)] {
			sum += e
		}
	}
	return sum
}

// drawInOrder is the draw itself: the first i with u < c_i, c_i the
// in-order running sum of exp(x_j − lse), or best when rounding leaves
// the total below u.
func drawInOrder(logits []float32, invT, lse, u float64, arg, ex []float64, best int) int {
	var c float64
	for i0 := 0; i0 < len(logits); i0 += SampleBlock {
		n := min(SampleBlock, len(logits)-i0)
		for i, v := range logits[i0 : i0+n] {
			arg[i] = float64(v)*invT - lse
		}
		exp64Into(ex[:n], arg[:n])
		for i, e := range ex[:n] {
			c += e
			if u < c {
				return i0 + i
			}
		}
	}
	return best
}

// prefixMargin bounds how far the draw's running sum of probabilities,
// c_i = Σ_{j≤i} exp(x_j − lse) summed in order, can lie from the first
// pass's P_i / S, P_i = Σ_{j≤i} exp(x_j − m) in order and S the total
// (x_j = logit_j / T, m the largest, lse = m + log S). Both sums of n
// positive terms carry a relative error below (n−1)·2⁻⁵³ (2·10⁻¹¹ for
// n = 151,936); each term's rounded argument (|x − lse| < 745, or it is 0
// or a denormal) and math.Exp's last bit add under 10⁻¹³ relative; so
// |c_i − P_i/S| < 10⁻¹⁰ for a vocabulary below 10⁶ tokens. The margin is
// ten times that.
const prefixMargin = 1e-9

// drawFromPrefix finds, from the first pass's prefix sums at the block
// starts, the token the in-order draw (u < c_i, first i) picks, without
// its second pass over the vocabulary: the block where P_i/S passes u is
// summed again (the same exps in the same order give the same P_i), and
// the crossing i is the draw's when P_{i−1}/S and P_i/S lie more than
// prefixMargin on either side of u. Otherwise (u within 10⁻⁹ of a
// boundary, about one draw in 10⁹) it reports false and the caller takes
// the in-order pass: the tokens are always the in-order pass's.
func drawFromPrefix(logits []float32, invT, m, sum float64, starts []float64, u float64, arg, ex []float64) (int, bool) {
	b := sort.Search(len(starts), func(b int) bool { return starts[b]/sum > u }) - 1 // starts[0] = 0
	i0 := b * SampleBlock
	blk := logits[i0:min(i0+SampleBlock, len(logits))]
	for i, v := range blk {
		arg[i] = float64(v)*invT - m
	}
	exp64Into(ex[:len(blk)], arg[:len(blk)])
	p := starts[b]
	for i, e := range ex[:len(blk)] {
		prev := p
		p += e
		if p/sum > u {
			if prev/sum < u-prefixMargin && p/sum > u+prefixMargin {
				return i0 + i, true
			}
			return 0, false
		}
	}
	return 0, false // u at the very top: the in-order pass decides
}

// SampleToken draws a token from logits under s and returns it with its
// log-probability under softmax(logits/T), the distribution before top-k
// and top-p truncation (log-probability 0 for greedy decoding's argmax).
// Ties in greedy decoding go to the lowest id, so greedy runs are
// reproducible. scratch is reused between calls to avoid allocation.
func SampleToken(logits []float32, s Sampling, rng *rand.Rand, scratch *[]int32) (int32, float32) {
	best := ArgMax(logits)
	if s.Temperature == 0 {
		return int32(best), 0
	}
	invT := 1 / s.Temperature
	m := float64(logits[best]) * invT
	// e^x over the vocabulary goes through exp64Into a block at a time
	// (math.Exp's bits, vectorised); the sums stay in order.
	sc := getScratch(2*SampleBlock + numBlocks(len(logits)))
	defer putScratch(sc)
	arg, ex, starts := (*sc)[:SampleBlock], (*sc)[SampleBlock:2*SampleBlock], (*sc)[2*SampleBlock:]
	sum := sumExps(logits, invT, m, arg, ex, starts)
	return drawToken(logits, s, rng, scratch, best, invT, m, sum, starts, arg, ex)
}

// numBlocks is how many blocks of SampleBlock logits a row of n has.
func numBlocks(n int) int { return (n + SampleBlock - 1) / SampleBlock }

// drawToken is SampleToken after the first pass: best is the argmax, m
// the largest logit over T, sum and starts what sumExps gave; arg and ex
// are scratch blocks.
func drawToken(logits []float32, s Sampling, rng *rand.Rand, scratch *[]int32, best int, invT, m, sum float64, starts, arg, ex []float64) (int32, float32) {
	lse := m + math.Log(sum)
	logp := func(i int) float64 { return float64(logits[i])*invT - lse }

	// Candidates: every id, or the top-k, sorted by probability when a
	// truncation needs the order.
	k := s.TopK
	if k <= 0 || k > len(logits) {
		k = len(logits)
	}
	if k == len(logits) && s.TopP >= 1 {
		u := rng.Float64()
		if id, ok := drawFromPrefix(logits, invT, m, sum, starts, u, arg, ex); ok {
			return int32(id), float32(logp(id))
		}
		id := drawInOrder(logits, invT, lse, u, arg, ex, best)
		return int32(id), float32(logp(id))
	}
	ids := (*scratch)[:0]
	for i := range logits {
		ids = append(ids, int32(i))
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	*scratch = ids
	ids = ids[:k]
	// Nucleus: the smallest prefix whose mass reaches top_p.
	var mass float64
	cut := len(ids)
	for j, id := range ids {
		mass += math.Exp(logp(int(id)))
		if mass >= s.TopP {
			cut = j + 1
			break
		}
	}
	ids = ids[:cut]
	var total float64
	for _, id := range ids {
		total += math.Exp(logp(int(id)))
	}
	u := rng.Float64() * total
	var c float64
	for _, id := range ids {
		c += math.Exp(logp(int(id)))
		if u < c {
			return id, float32(logp(int(id)))
		}
	}
	last := ids[len(ids)-1]
	return last, float32(logp(int(last)))
}
