package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
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
// 151,936-token row costs about a millisecond (two passes of exp and an
// in-order sum), so a batch of 32 rows drawn on one core would add tens of
// milliseconds to every decode step. f must touch only row j's state (its
// own random stream above all), so the draws do not depend on the split.
func EachRow(n int, f func(j int, scratch *[]int32)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		var scratch []int32
		for j := range n {
			f(j, &scratch)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []int32
			for j := w; j < n; j += workers {
				f(j, &scratch)
			}
		}()
	}
	wg.Wait()
}

// sampleBlock is how many logits SampleToken exponentiates at a time.
const sampleBlock = 1024

// SampleToken draws a token from logits under s and returns it with its
// log-probability under softmax(logits/T), the distribution before top-k
// and top-p truncation (log-probability 0 for greedy decoding's argmax).
// Ties in greedy decoding go to the lowest id, so greedy runs are
// reproducible. scratch is reused between calls to avoid allocation.
func SampleToken(logits []float32, s Sampling, rng *rand.Rand, scratch *[]int32) (int32, float32) {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	if s.Temperature == 0 {
		return int32(best), 0
	}
	invT := 1 / s.Temperature
	m := float64(logits[best]) * invT
	// e^x over the vocabulary goes through exp64Into a block at a time
	// (math.Exp's bits, vectorised); the sums stay in order.
	sc := getRow[float64](2 * sampleBlock)
	defer putRow(sc)
	arg, ex := (*sc)[:sampleBlock], (*sc)[sampleBlock:]
	var sum float64
	for i0 := 0; i0 < len(logits); i0 += sampleBlock {
		blk := logits[i0:min(i0+sampleBlock, len(logits))]
		for i, v := range blk {
			arg[i] = float64(v)*invT - m
		}
		exp64Into(ex[:len(blk)], arg[:len(blk)])
		for _, e := range ex[:len(blk)] {
			sum += e
		}
	}
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
		var c float64
		for i0 := 0; i0 < len(logits); i0 += sampleBlock {
			n := min(sampleBlock, len(logits)-i0)
			for i := range n {
				arg[i] = logp(i0 + i)
			}
			exp64Into(ex[:n], arg[:n])
			for i, e := range ex[:n] {
				c += e
				if u < c {
					return int32(i0 + i), float32(logp(i0 + i))
				}
			}
		}
		return int32(best), float32(logp(best))
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
