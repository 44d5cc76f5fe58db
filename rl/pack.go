package rl

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// The one seam between the model's vocabulary and the RL code's; nothing
// else in rl/ converts between them. Two conventions differ:
//
//   - Sequence bounds and ids: model.Batch holds int32 Seqs (the offsets) and
//     int32 token ids, as the kernels and the KV cache want them; a Batch
//     holds int Offsets (Go indexing) and the same int32 Tokens; the
//     tokenizer speaks []int. modelBatch, toInt32 and toInts convert.
//   - Positions: the model's per-token
// outputs describe the *next* token: its LogProb[t] is log p(x[t+1] | x[..t]).
// A Batch's describe the token itself: LogProb[t] is log π(x[t] | x[..t−1]),
// the probability with which token t was sampled. So every value moves one
// position right on the way in (the first token of a sequence gets 0; it is
// a prompt token and never an action) and every gradient one position left
// on the way out. Values follow the same rule: the critic's value for token
// t is its output after x[..t−1], the state in which t was chosen (verl's
// values[:, -response_length-1:-1]). shiftIn and shiftOut convert, and
// Forward (the no-grad pass) and the trainer's updates are their only
// callers.

// FromTrajectories packs trajectories into a Batch with Tokens, Offsets,
// PromptLen, Group, ActionMask, AdvantageMask and SampleLogProb. With
// advantageMask false the advantage mask is every response token (the
// paper's Table 4 ablation); otherwise it equals the action mask.
func FromTrajectories(trajs []*Trajectory, advantageMask bool) *Batch {
	b := &Batch{Offsets: []int{0}}
	for _, t := range trajs {
		b.Tokens = append(b.Tokens, t.Tokens...)
		b.Offsets = append(b.Offsets, len(b.Tokens))
		b.PromptLen = append(b.PromptLen, t.PromptLen)
		b.Group = append(b.Group, t.Group)
		b.ActionMask = append(b.ActionMask, t.Action...)
		for k := range t.Tokens {
			b.SampleLogProb = append(b.SampleLogProb, float64(t.LogProb[k]))
		}
	}
	if advantageMask {
		b.AdvantageMask = b.ActionMask
	} else {
		b.AdvantageMask = make([]bool, len(b.Tokens))
		for i, t := range trajs {
			for k := b.Offsets[i] + t.PromptLen; k < b.Offsets[i+1]; k++ {
				b.AdvantageMask[k] = true
			}
		}
	}
	return b
}

// MicroBatches splits sequences [0, S) into consecutive runs of at most
// maxTokens tokens each (a longer sequence gets a run of its own) and
// returns the run boundaries: run j is sequences [cuts[j], cuts[j+1]).
func MicroBatches(b *Batch, maxTokens int) []int {
	cuts := []int{0}
	n := 0
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		if n > 0 && n+(e-s) > maxTokens {
			cuts = append(cuts, i)
			n = 0
		}
		n += e - s
	}
	if cuts[len(cuts)-1] != b.NumSeqs() {
		cuts = append(cuts, b.NumSeqs())
	}
	return cuts
}

// modelBatch is the model's view of a Batch.
func modelBatch(b *Batch) model.Batch {
	mb := model.Batch{Tokens: b.Tokens, Seqs: make([]int32, len(b.Offsets))}
	for i, o := range b.Offsets {
		mb.Seqs[i] = int32(o)
	}
	return mb
}

// scoredBatch is modelBatch with the LM head run only where the loss reads
// its output: at the tokens in mask (the Batch convention: the model
// scores token t at row t−1 of its sequence). A nil mask scores every row.
func scoredBatch(b *Batch, mask []bool) model.Batch {
	mb := modelBatch(b)
	if mask == nil {
		return mb
	}
	mb.Scored = make([]int32, 0, b.NumTokens())
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		for t := s + 1; t < e; t++ {
			if mask[t] {
				mb.Scored = append(mb.Scored, int32(t-1))
			}
		}
	}
	return mb
}

// shiftIn writes src (the model's next-token convention) into dst (the
// Batch's own-token convention), sized to b's tokens.
func shiftIn(b *Batch, dst []float64, src []float32) []float64 {
	dst = zeroed(dst, b.NumTokens())
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		for t := s + 1; t < e; t++ {
			dst[t] = float64(src[t-1])
		}
	}
	return dst
}

// shiftOut writes a Batch-convention gradient as a model-convention one.
func shiftOut(b *Batch, g []float64) []float32 {
	if g == nil {
		return nil
	}
	out := make([]float32, b.NumTokens())
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		for t := s + 1; t < e; t++ {
			out[t-1] = float32(g[t])
		}
	}
	return out
}

// Forward runs m over b in micro-batches of at most maxTokens tokens without
// keeping activations (no gradient) and returns per-token log-probabilities
// and entropies (a policy) or values (a critic) in the Batch convention.
// With the prompts' lengths known, a policy's are those of the response
// tokens (0 on the prompts, which no loss or penalty reads).
func Forward(m *model.Model, b *Batch, maxTokens int) (logProb, entropy, values []float64, err error) {
	cuts := MicroBatches(b, maxTokens)
	n := b.NumTokens()
	var resp []bool
	if b.PromptLen != nil && m.Head == model.LMHeadOutput {
		if resp, err = b.ResponseMask(); err != nil {
			return nil, nil, nil, err
		}
	}
	switch m.Head {
	case model.LMHeadOutput:
		logProb, entropy = make([]float64, n), make([]float64, n)
	case model.ValueHeadOutput:
		values = make([]float64, n)
	}
	for j := 0; j+1 < len(cuts); j++ {
		mb := b.Slice(cuts[j], cuts[j+1])
		var mask []bool
		if resp != nil {
			mask = resp[b.Offsets[cuts[j]]:b.Offsets[cuts[j+1]]]
		}
		out, err := m.Forward(scoredBatch(mb, mask), false)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("rl: forward pass over sequences %d..%d: %w", cuts[j], cuts[j+1]-1, err)
		}
		// shiftIn writes into the micro-batch's own range of the result.
		lo, hi := b.Offsets[cuts[j]], b.Offsets[cuts[j+1]]
		if out.LogProb != nil {
			shiftIn(mb, logProb[lo:hi], out.LogProb)
			shiftIn(mb, entropy[lo:hi], out.Entropy)
		}
		if out.Values != nil {
			shiftIn(mb, values[lo:hi], out.Values)
		}
	}
	return logProb, entropy, values, nil
}

// toInt32 converts tokenizer ids to the model's.
func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// toInts converts model ids to the tokenizer's.
func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
