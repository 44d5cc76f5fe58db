package model

import (
	"fmt"
	"math/rand/v2"
)

// Decoded is the result of one decode step: for each chunk the sampled
// next token and its log-probability under softmax(logits/T) (0 for
// greedy decoding), and the full logits of the chunks the caller asked
// for, [len(keep)][V] flattened in keep's order.
type Decoded struct {
	Tokens   []int32
	LogProbs []float32
	Logits   []float32
}

// StepSample is Step followed by sampling each chunk's next token under s.
// seeds holds one seed per chunk (draw it from the trajectory's own random
// stream, so a trajectory's draws do not depend on its batch neighbours);
// keep lists chunks whose full logits the caller wants back.
//
// On a device that is a Sampler the tokens are drawn where the logits are
// (on the GPU for the CUDA device: only the rows in keep are downloaded;
// on the CPU's threads, each row with a PCG stream seeded by seeds[j]).
// Elsewhere the logits are downloaded and SampleToken draws each row with
// that stream. The devices draw from the same distribution, not the same
// numbers. Step itself is unchanged.
func (m *Model) StepSample(c *KVCache, chunks []Chunk, s Sampling, seeds []uint64, keep []int) (Decoded, error) {
	if len(seeds) != len(chunks) {
		return Decoded{}, fmt.Errorf("model: StepSample with %d chunks and %d seeds", len(chunks), len(seeds))
	}
	for _, j := range keep {
		if j < 0 || j >= len(chunks) {
			return Decoded{}, fmt.Errorf("model: StepSample keeps logits of chunk %d of %d", j, len(chunks))
		}
	}
	if err := s.Validate(); err != nil {
		return Decoded{}, err
	}
	V := m.Config.VocabSize
	out := Decoded{Tokens: make([]int32, len(chunks)), LogProbs: make([]float32, len(chunks)), Logits: make([]float32, len(keep)*V)}
	n := len(chunks) * V
	var lb Buffer
	if DrawsOnDevice(m.Dev) {
		// Device memory: the step's own logits, freed after the draws.
		var err error
		if lb, err = m.stepLogits(c, chunks); err != nil {
			return Decoded{}, err
		}
		defer m.Dev.Free(lb)
	} else {
		// Host memory: one logits buffer, kept between steps. A batch-32
		// step of a 151,936-token vocabulary writes 19 MB, which as fresh
		// garbage every step would pile up gigabytes before the collector
		// runs.
		if m.sampleLogits == nil || m.sampleLogits.Len() < n {
			if m.sampleLogits != nil {
				m.Dev.Free(m.sampleLogits)
			}
			m.sampleLogits = m.allocStepLogits(n)
		}
		lb = m.sampleLogits.Slice(0, n)
		if err := m.stepInto(c, chunks, lb, nil); err != nil {
			return Decoded{}, err
		}
	}
	if sm, ok := m.Dev.(Sampler); ok {
		if err := sm.SampleRows(out.Tokens, out.LogProbs, lb, V, s, seeds); err != nil {
			return Decoded{}, err
		}
		for i, j := range keep {
			m.Dev.Download(out.Logits[i*V:(i+1)*V], lb.Slice(j*V, V))
		}
		return out, m.Dev.Sync()
	}
	logits := make([]float32, n)
	m.Dev.Download(logits, lb)
	if err := m.Dev.Sync(); err != nil {
		return Decoded{}, err
	}
	draws := make([]Draw, len(chunks))
	for j := range draws {
		draws[j] = Draw{Row: logits[j*V : (j+1)*V], S: s, Rng: rand.New(rand.NewPCG(seeds[j], 0x5eed))}
	}
	SampleAll(draws)
	for j, d := range draws {
		out.Tokens[j], out.LogProbs[j] = d.ID, d.LogProb
	}
	for i, j := range keep {
		copy(out.Logits[i*V:(i+1)*V], logits[j*V:(j+1)*V])
	}
	return out, nil
}

// allocStepLogits allocates StepSample's logits: a rollout copy's in
// StoreEngineLogits where the device holds it, which its Sampler draws
// from as an inference engine does.
func (m *Model) allocStepLogits(n int) Buffer {
	if m.bf16Products() {
		if b, ok := AllocAs(m.Dev, n, StoreEngineLogits); ok {
			return b
		}
	}
	return m.Dev.Alloc(n)
}

// DrawsOnDevice says whether dev draws tokens from logits that stay in
// its own memory (a Sampler whose buffers are not host memory: the CUDA
// device), so that a decode step moves a token id and its log-probability
// per row instead of a row of V logits.
func DrawsOnDevice(dev Device) bool {
	_, s := dev.(Sampler)
	_, host := dev.(HostMemory)
	return s && !host
}

// Decoder runs decode steps of one model and cache with StepSample's
// contract, keeping its logits buffer between steps so that, on a device
// that is a StepGrapher and a Sampler (the CUDA device), a decode
// step (every chunk one token) replays as a graph and samples on the
// device. On other devices Step is StepSample.
type Decoder struct {
	M      *Model
	C      *KVCache
	logits Buffer // [rows][V], reused while the row count stays
}

// NewDecoder returns a Decoder over m and c.
func NewDecoder(m *Model, c *KVCache) *Decoder { return &Decoder{M: m, C: c} }

// Step is StepSample through the Decoder's buffers.
func (dc *Decoder) Step(chunks []Chunk, s Sampling, seeds []uint64, keep []int) (Decoded, error) {
	m := dc.M
	ds, okS := m.Dev.(Sampler)
	sg, okG := m.Dev.(StepGrapher)
	decode := len(chunks) > 0
	for _, ch := range chunks {
		decode = decode && len(ch.Tokens) == 1
	}
	if !okS || !okG || !decode {
		return m.StepSample(dc.C, chunks, s, seeds, keep)
	}
	if len(seeds) != len(chunks) {
		return Decoded{}, fmt.Errorf("model: Decoder.Step with %d chunks and %d seeds", len(chunks), len(seeds))
	}
	for _, j := range keep {
		if j < 0 || j >= len(chunks) {
			return Decoded{}, fmt.Errorf("model: Decoder.Step keeps logits of chunk %d of %d", j, len(chunks))
		}
	}
	if err := s.Validate(); err != nil {
		return Decoded{}, err
	}
	V := m.Config.VocabSize
	if dc.logits == nil || dc.logits.Len() != len(chunks)*V {
		dc.Free()
		dc.logits = m.Dev.Alloc(len(chunks) * V)
	}
	if err := m.stepInto(dc.C, chunks, dc.logits, sg.GraphStep); err != nil {
		return Decoded{}, err
	}
	out := Decoded{Tokens: make([]int32, len(chunks)), LogProbs: make([]float32, len(chunks)), Logits: make([]float32, len(keep)*V)}
	if err := ds.SampleRows(out.Tokens, out.LogProbs, dc.logits, V, s, seeds); err != nil {
		return Decoded{}, err
	}
	for i, j := range keep {
		m.Dev.Download(out.Logits[i*V:(i+1)*V], dc.logits.Slice(j*V, V))
	}
	return out, m.Dev.Sync()
}

// Free releases the Decoder's logits buffer.
func (dc *Decoder) Free() {
	if dc.logits != nil {
		dc.M.Dev.Free(dc.logits)
		dc.logits = nil
	}
}
