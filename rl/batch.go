package rl

import (
	"fmt"
	"math"
)

// Batch is a packed batch of trajectories: every per-token slice holds the
// tokens of all sequences back to back, and sequence i occupies the half-open
// token range [Offsets[i], Offsets[i+1]). A sequence is its prompt followed by
// its response (model turns interleaved with environment text), so the first
// PromptLen[i] tokens of sequence i are prompt tokens.
//
// Per-token quantities at token t belong to the token itself: LogProb[t] is
// log π(token t | tokens before t), Values[t] is the critic's value there,
// Rewards[t] is the reward received on emitting token t.
//
// Slices the caller does not need may be nil; each estimator and loss names
// the fields it reads in its documentation and Validate checks only those.
type Batch struct {
	Offsets   []int // [S+1] Offsets[0] = 0, Offsets[S] = N, non-decreasing
	PromptLen []int // [S] prompt tokens at the start of each sequence (may be nil)
	Group     []int // [S] group id: sequences sampled from one prompt share it
	// Traj names the trajectory of each sequence when one is packed as
	// several (step mode, steppack.go): its sequences are consecutive and
	// in turn order. Nil: each sequence is a trajectory of its own.
	Traj []int // [S]
	// Truncated marks the sequences of trajectories a length budget ended,
	// for rollout.truncation_loss mask (budget.go); nil when not asked.
	Truncated []bool // [S]

	Tokens        []int32 // [N] token ids
	ActionMask    []bool  // [N] true on tokens the policy sampled (the loss mask)
	AdvantageMask []bool  // [N] tokens the estimator credits (ActionMask, or every response token for the ablation)

	Scores  []float64 // [N] raw rewards: outcome on the last action token, process rewards at tool-call ends
	Rewards []float64 // [N] estimator input: Scores, less β·KL when KL is in the reward

	SampleLogProb []float64 // [N] log-probs reported by the sampler during the rollout
	OldLogProb    []float64 // [N] log-probs of the policy that sampled, recomputed by the trainer (π_old)
	RefLogProb    []float64 // [N] log-probs of the reference policy
	OldValues     []float64 // [N] critic values at rollout time (estimator input, value-clip centre)

	Advantages []float64 // [N] written by an Estimator; 0 where AdvantageMask is false
	Returns    []float64 // [N] written by an Estimator

	BaselineScore []float64 // [S] ReMax: score of the greedy response to the same prompt

	// Current-policy outputs of the model for this (micro-)batch. In the
	// update the LM head runs on the loss's tokens only (ActionMask: the
	// response under loss_mask false), and LogProb and Entropy are 0 at
	// the others; OldLogProb and RefLogProb cover the response.
	LogProb []float64 // [N] log π_θ
	Entropy []float64 // [N] entropy of π_θ at each position
	Values  []float64 // [N] critic V_φ
}

// NumSeqs returns the number of sequences S.
func (b *Batch) NumSeqs() int {
	if len(b.Offsets) == 0 {
		return 0
	}
	return len(b.Offsets) - 1
}

// NumTokens returns the number of packed tokens N.
func (b *Batch) NumTokens() int {
	if len(b.Offsets) == 0 {
		return 0
	}
	return b.Offsets[len(b.Offsets)-1]
}

// Seq returns the token range [start, end) of sequence i.
func (b *Batch) Seq(i int) (start, end int) { return b.Offsets[i], b.Offsets[i+1] }

// Slice returns the sequences [i, j) as a Batch that shares every per-token
// slice with b (like image.SubImage); only Offsets is freshly allocated,
// rebased to start at 0. Micro-batches are slices of the mini-batch.
func (b *Batch) Slice(i, j int) *Batch {
	if i < 0 || j < i || j > b.NumSeqs() {
		panic(fmt.Sprintf("rl: Slice(%d, %d) of a batch of %d sequences", i, j, b.NumSeqs()))
	}
	lo, hi := b.Offsets[i], b.Offsets[j]
	off := make([]int, j-i+1)
	for k := range off {
		off[k] = b.Offsets[i+k] - lo
	}
	s := &Batch{Offsets: off}
	s.PromptLen = subInts(b.PromptLen, i, j)
	s.Group = subInts(b.Group, i, j)
	s.Traj = subInts(b.Traj, i, j)
	s.Truncated = subBools(b.Truncated, i, j)
	if b.Tokens != nil {
		s.Tokens = b.Tokens[lo:hi]
	}
	s.ActionMask = subBools(b.ActionMask, lo, hi)
	s.AdvantageMask = subBools(b.AdvantageMask, lo, hi)
	for _, f := range []struct{ dst, src *[]float64 }{
		{&s.Scores, &b.Scores}, {&s.Rewards, &b.Rewards},
		{&s.SampleLogProb, &b.SampleLogProb}, {&s.OldLogProb, &b.OldLogProb},
		{&s.RefLogProb, &b.RefLogProb}, {&s.OldValues, &b.OldValues},
		{&s.Advantages, &b.Advantages}, {&s.Returns, &b.Returns},
		{&s.LogProb, &b.LogProb}, {&s.Entropy, &b.Entropy}, {&s.Values, &b.Values},
	} {
		if *f.src != nil {
			*f.dst = (*f.src)[lo:hi]
		}
	}
	if b.BaselineScore != nil {
		s.BaselineScore = b.BaselineScore[i:j]
	}
	return s
}

func subInts(x []int, i, j int) []int {
	if x == nil {
		return nil
	}
	return x[i:j]
}

func subBools(x []bool, i, j int) []bool {
	if x == nil {
		return nil
	}
	return x[i:j]
}

// Field names a per-token or per-sequence slice of a Batch, for Validate and
// for error messages.
type Field string

// The fields of a Batch that estimators and losses read.
const (
	FieldActionMask    Field = "ActionMask"
	FieldAdvantageMask Field = "AdvantageMask"
	FieldGroup         Field = "Group"
	FieldScores        Field = "Scores"
	FieldRewards       Field = "Rewards"
	FieldSampleLogProb Field = "SampleLogProb"
	FieldOldLogProb    Field = "OldLogProb"
	FieldRefLogProb    Field = "RefLogProb"
	FieldOldValues     Field = "OldValues"
	FieldAdvantages    Field = "Advantages"
	FieldReturns       Field = "Returns"
	FieldBaselineScore Field = "BaselineScore"
	FieldLogProb       Field = "LogProb"
	FieldEntropy       Field = "Entropy"
	FieldValues        Field = "Values"
)

// floats returns the float slice behind a field and whether it is per sequence.
func (b *Batch) floats(f Field) (x []float64, perSeq bool) {
	switch f {
	case FieldScores:
		return b.Scores, false
	case FieldRewards:
		return b.Rewards, false
	case FieldSampleLogProb:
		return b.SampleLogProb, false
	case FieldOldLogProb:
		return b.OldLogProb, false
	case FieldRefLogProb:
		return b.RefLogProb, false
	case FieldOldValues:
		return b.OldValues, false
	case FieldAdvantages:
		return b.Advantages, false
	case FieldReturns:
		return b.Returns, false
	case FieldBaselineScore:
		return b.BaselineScore, true
	case FieldLogProb:
		return b.LogProb, false
	case FieldEntropy:
		return b.Entropy, false
	case FieldValues:
		return b.Values, false
	}
	panic("rl: no float field " + string(f))
}

// Validate checks the layout (Offsets, PromptLen, Group, masks) and that each
// named field is present with the right length and holds only finite numbers.
// Errors name the field and the position: "rl: LogProb[17] (sequence 2,
// token 5) is NaN".
func (b *Batch) Validate(fields ...Field) error {
	return b.check(true, fields)
}

// require checks the layout and the presence and length of fields but not
// their values; loss kernels use it and check finiteness inside their single
// pass instead.
func (b *Batch) require(fields ...Field) error {
	return b.check(false, fields)
}

func (b *Batch) check(values bool, fields []Field) error {
	if err := b.validateLayout(); err != nil {
		return err
	}
	for _, f := range fields {
		switch f {
		case FieldActionMask:
			if err := b.checkLen(string(f), len(b.ActionMask), b.ActionMask == nil, false); err != nil {
				return err
			}
		case FieldAdvantageMask:
			if err := b.checkLen(string(f), len(b.AdvantageMask), b.AdvantageMask == nil, false); err != nil {
				return err
			}
		case FieldGroup:
			if err := b.checkLen(string(f), len(b.Group), b.Group == nil, true); err != nil {
				return err
			}
		default:
			x, perSeq := b.floats(f)
			if err := b.checkLen(string(f), len(x), x == nil, perSeq); err != nil {
				return err
			}
			if !values {
				continue
			}
			if err := b.checkFinite(string(f), x, perSeq); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Batch) validateLayout() error {
	if len(b.Offsets) == 0 {
		return fmt.Errorf("rl: Offsets is empty (want S+1 entries starting at 0)")
	}
	if b.Offsets[0] != 0 {
		return fmt.Errorf("rl: Offsets[0] = %d, want 0", b.Offsets[0])
	}
	for i := 1; i < len(b.Offsets); i++ {
		if b.Offsets[i] < b.Offsets[i-1] {
			return fmt.Errorf("rl: Offsets[%d] = %d is less than Offsets[%d] = %d", i, b.Offsets[i], i-1, b.Offsets[i-1])
		}
	}
	if b.PromptLen != nil {
		if len(b.PromptLen) != b.NumSeqs() {
			return fmt.Errorf("rl: PromptLen has %d entries, want %d (one per sequence)", len(b.PromptLen), b.NumSeqs())
		}
		for i, p := range b.PromptLen {
			if n := b.Offsets[i+1] - b.Offsets[i]; p < 0 || p > n {
				return fmt.Errorf("rl: PromptLen[%d] = %d outside the sequence's %d tokens", i, p, n)
			}
		}
	}
	if b.Traj != nil && len(b.Traj) != b.NumSeqs() {
		return fmt.Errorf("rl: Traj has %d entries, want %d (one per sequence)", len(b.Traj), b.NumSeqs())
	}
	if b.Tokens != nil && len(b.Tokens) != b.NumTokens() {
		return fmt.Errorf("rl: Tokens has %d entries, want %d", len(b.Tokens), b.NumTokens())
	}
	return nil
}

func (b *Batch) checkLen(name string, n int, missing, perSeq bool) error {
	want, unit := b.NumTokens(), "tokens"
	if perSeq {
		want, unit = b.NumSeqs(), "sequences"
	}
	if missing {
		return fmt.Errorf("rl: %s is nil (want %d entries, one per %s)", name, want, unit[:len(unit)-1])
	}
	if n != want {
		return fmt.Errorf("rl: %s has %d entries, want %d (%s)", name, n, want, unit)
	}
	return nil
}

func (b *Batch) checkFinite(name string, x []float64, perSeq bool) error {
	for t, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return b.badValue(name, t, v, perSeq)
		}
	}
	return nil
}

// badValue formats the error for a non-finite entry.
func (b *Batch) badValue(name string, t int, v float64, perSeq bool) error {
	if perSeq {
		return fmt.Errorf("rl: %s[%d] (sequence %d) is %v", name, t, t, v)
	}
	s := b.seqOf(t)
	return fmt.Errorf("rl: %s[%d] (sequence %d, token %d) is %v", name, t, s, t-b.Offsets[s], v)
}

// seqOf returns the sequence holding token t (binary search over Offsets).
func (b *Batch) seqOf(t int) int {
	lo, hi := 0, b.NumSeqs()-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if b.Offsets[mid] <= t {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	// Skip empty sequences that share the offset.
	for lo+1 < b.NumSeqs() && b.Offsets[lo+1] <= t {
		lo++
	}
	return lo
}

// ResponseMask returns a mask that is true on every response token (all
// tokens after the prompt), the advantage mask of the paper's Table 4
// ablation "advantage mask disabled". It needs PromptLen.
func (b *Batch) ResponseMask() ([]bool, error) {
	if err := b.validateLayout(); err != nil {
		return nil, err
	}
	if b.PromptLen == nil {
		return nil, fmt.Errorf("rl: ResponseMask needs PromptLen")
	}
	m := make([]bool, b.NumTokens())
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		for t := s + b.PromptLen[i]; t < e; t++ {
			m[t] = true
		}
	}
	return m, nil
}

// RewardsFromScores sets Rewards to a copy of Scores, for runs without a KL
// penalty in the reward.
func (b *Batch) RewardsFromScores() error {
	if err := b.Validate(FieldScores); err != nil {
		return err
	}
	b.Rewards = append(b.Rewards[:0], b.Scores...)
	return nil
}

// Widen converts model outputs (float32) into dst (float64), reusing dst's
// storage when it is large enough.
func Widen(dst []float64, src []float32) []float64 {
	if cap(dst) < len(src) {
		dst = make([]float64, len(src))
	}
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
	return dst
}

// Narrow converts gradients (float64) into dst (float32) for the model's
// backward pass, reusing dst's storage when it is large enough.
func Narrow(dst []float32, src []float64) []float32 {
	if cap(dst) < len(src) {
		dst = make([]float32, len(src))
	}
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(v)
	}
	return dst
}
