package data

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// SamplerConfig sets how a Sampler draws batches.
type SamplerConfig struct {
	BatchSize int
	Seed      uint64
	// Shuffle draws a fresh permutation every epoch; false keeps file order.
	Shuffle bool
	// DropLast drops the last, short batch of an epoch (verl's train
	// loader does); false serves it short.
	DropLast bool
}

// SamplerState is a Sampler's position, small enough for a checkpoint's
// JSON. The configuration is in it so Restore can refuse a state taken
// from a different run.
type SamplerState struct {
	N        int    `json:"n"`
	Batch    int    `json:"batch_size"`
	Seed     uint64 `json:"seed"`
	Shuffle  bool   `json:"shuffle"`
	DropLast bool   `json:"drop_last"`
	Epoch    int    `json:"epoch"`  // 0-based epoch of the next batch
	Offset   int    `json:"offset"` // position of the next batch in that epoch's order
	Batches  int64  `json:"batches"`
}

// Sampler deals indices into a set of n samples in batches. Epoch e's order
// is a permutation drawn from (Seed, e) alone, so the position (epoch,
// offset) is the whole state: a restored sampler deals exactly the batches
// the saved one would have.
type Sampler struct {
	cfg     SamplerConfig
	n       int
	epoch   int
	offset  int
	batches int64
	order   []int // the current epoch's order
}

// NewSampler makes a sampler over n samples.
func NewSampler(n int, cfg SamplerConfig) (*Sampler, error) {
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("data: sampler batch size %d, want at least 1", cfg.BatchSize)
	}
	if n < 1 {
		return nil, errors.New("data: sampler over an empty set")
	}
	if cfg.DropLast && n < cfg.BatchSize {
		return nil, fmt.Errorf("data: sampler batch size %d exceeds the %d samples and DropLast would drop them all", cfg.BatchSize, n)
	}
	s := &Sampler{cfg: cfg, n: n}
	s.order = s.epochOrder(0)
	return s, nil
}

// BatchesPerEpoch is how many batches one pass over the set deals.
func (s *Sampler) BatchesPerEpoch() int {
	if s.cfg.DropLast {
		return s.n / s.cfg.BatchSize
	}
	return (s.n + s.cfg.BatchSize - 1) / s.cfg.BatchSize
}

// Epoch is the 0-based epoch the next batch comes from.
func (s *Sampler) Epoch() int { return s.epoch }

// Next returns the indices of the next batch, moving to the next epoch when
// this one is used up. The slice is the caller's.
func (s *Sampler) Next() []int {
	end := s.offset + s.cfg.BatchSize
	if end > s.n {
		end = s.n
	}
	batch := append([]int(nil), s.order[s.offset:end]...)
	s.offset = end
	s.batches++
	if s.offset == s.n || (s.cfg.DropLast && s.offset+s.cfg.BatchSize > s.n) {
		s.epoch++
		s.offset = 0
		s.order = s.epochOrder(s.epoch)
	}
	return batch
}

// State returns the position of the next batch.
func (s *Sampler) State() SamplerState {
	return SamplerState{N: s.n, Batch: s.cfg.BatchSize, Seed: s.cfg.Seed, Shuffle: s.cfg.Shuffle, DropLast: s.cfg.DropLast,
		Epoch: s.epoch, Offset: s.offset, Batches: s.batches}
}

// Restore moves the sampler to a saved position. The saved configuration
// must match this sampler's: resuming over a different set or batch size
// would silently change the data order.
func (s *Sampler) Restore(st SamplerState) error {
	if st.N != s.n || st.Batch != s.cfg.BatchSize || st.Seed != s.cfg.Seed || st.Shuffle != s.cfg.Shuffle || st.DropLast != s.cfg.DropLast {
		return fmt.Errorf("data: sampler state for n=%d batch=%d seed=%d shuffle=%v drop_last=%v does not fit this sampler (n=%d batch=%d seed=%d shuffle=%v drop_last=%v)",
			st.N, st.Batch, st.Seed, st.Shuffle, st.DropLast, s.n, s.cfg.BatchSize, s.cfg.Seed, s.cfg.Shuffle, s.cfg.DropLast)
	}
	if st.Epoch < 0 || st.Offset < 0 || st.Offset >= s.n || st.Offset%s.cfg.BatchSize != 0 || st.Batches < 0 ||
		(s.cfg.DropLast && st.Offset+s.cfg.BatchSize > s.n) {
		return fmt.Errorf("data: sampler state epoch %d offset %d is not a batch boundary of %d samples in batches of %d", st.Epoch, st.Offset, s.n, s.cfg.BatchSize)
	}
	s.epoch, s.offset, s.batches = st.Epoch, st.Offset, st.Batches
	s.order = s.epochOrder(s.epoch)
	return nil
}

// epochOrder is epoch e's order of the n indices.
func (s *Sampler) epochOrder(e int) []int {
	if !s.cfg.Shuffle {
		order := make([]int, s.n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return permutation(s.n, s.cfg.Seed, uint64(e))
}

// permutation returns a permutation of 0..n-1 drawn from (seed, stream) by
// a Fisher-Yates shuffle over PCG, with its own bounded draw, so the order
// depends only on the PCG algorithm (fixed by its specification), not on
// how a Go release implements Shuffle or Perm.
func permutation(n int, seed, stream uint64) []int {
	rng := rand.NewPCG(seed, stream)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(bounded(rng, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bounded draws uniformly from [0, n) by Lemire's multiply-and-reject.
func bounded(rng *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(rng.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(rng.Uint64(), n)
		}
	}
	return hi
}

// Shuffle returns the samples in an order drawn from seed; the input is
// left alone.
func Shuffle(samples []Sample, seed uint64) []Sample {
	out := make([]Sample, len(samples))
	for i, j := range permutation(len(samples), seed, shuffleStream) {
		out[i] = samples[j]
	}
	return out
}

// Subsample draws n samples without replacement by seed, keeping their
// file order, as Agent-R1's preprocessing draws --train_size samples; all of
// them when n >= len(samples).
func Subsample(samples []Sample, n int, seed uint64) []Sample {
	if n >= len(samples) {
		return append([]Sample(nil), samples...)
	}
	if n <= 0 {
		return nil
	}
	chosen := make([]bool, len(samples))
	for _, j := range permutation(len(samples), seed, subsampleStream)[:n] {
		chosen[j] = true
	}
	out := make([]Sample, 0, n)
	for i, s := range samples {
		if chosen[i] {
			out = append(out, s)
		}
	}
	return out
}

// Streams of the one-shot draws, apart from the sampler's epoch streams
// (which count up from 0).
const (
	shuffleStream   = 1 << 62
	subsampleStream = 1<<62 + 1
)
