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
// On a device that implements DeviceSampler the tokens are drawn on the
// device and only the rows in keep are downloaded. Elsewhere (the CPU
// device) the logits are downloaded and SampleToken draws each row with a
// PCG stream seeded by seeds[j]. Both draw from the same distribution,
// not the same numbers. Step itself is unchanged.
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
	ds, onDevice := m.Dev.(DeviceSampler)
	if !onDevice {
		// One logits buffer, kept between steps: a batch-32 step of a
		// 151,936-token vocabulary writes 19 MB, which as fresh garbage
		// every step would pile up gigabytes before the collector runs.
		n := len(chunks) * V
		if m.sampleLogits == nil || m.sampleLogits.Len() < n {
			if m.sampleLogits != nil {
				m.Dev.Free(m.sampleLogits)
			}
			m.sampleLogits = m.Dev.Alloc(n)
		}
		lb := m.sampleLogits.Slice(0, n)
		if err := m.stepInto(c, chunks, lb, nil); err != nil {
			return Decoded{}, err
		}
		logits, host := HostF32(m.Dev, lb) // the CPU's logits are host memory already
		if !host {
			logits = make([]float32, lb.Len())
			m.Dev.Download(logits, lb)
			if err := m.Dev.Sync(); err != nil {
				return Decoded{}, err
			}
		}
		draws := make([]Draw, len(chunks))
		for j := range draws {
			draws[j] = Draw{Row: logits[j*V : (j+1)*V], S: s, Rng: rand.New(rand.NewPCG(seeds[j], 0x5eed))}
		}
		if hs, ok := m.Dev.(HostSampler); ok {
			hs.SampleHost(draws, m.bf16Products()) // a rollout copy samples in float32
		} else {
			SampleAll(draws)
		}
		for j, d := range draws {
			out.Tokens[j], out.LogProbs[j] = d.ID, d.LogProb
		}
		for i, j := range keep {
			copy(out.Logits[i*V:(i+1)*V], logits[j*V:(j+1)*V])
		}
		return out, nil
	}
	logits, err := m.stepLogits(c, chunks)
	if err != nil {
		return Decoded{}, err
	}
	defer m.Dev.Free(logits)
	if err := ds.SampleRows(out.Tokens, out.LogProbs, logits, V, s, seeds); err != nil {
		return Decoded{}, err
	}
	for i, j := range keep {
		m.Dev.Download(out.Logits[i*V:(i+1)*V], logits.Slice(j*V, V))
	}
	return out, m.Dev.Sync()
}

// Decoder runs decode steps of one model and cache with StepSample's
// contract, keeping its logits buffer between steps so that, on a device
// that is a StepGrapher and a DeviceSampler (the CUDA device), a decode
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
	ds, okS := m.Dev.(DeviceSampler)
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
