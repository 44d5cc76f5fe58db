package rl

import "fmt"

// AggMode says how per-token losses ℓ_t become one number (verl's
// loss_agg_mode). It is kept apart from the loss math: every loss computes
// ℓ_t and dℓ_t/dx_t, and the aggregation contributes one weight per sequence,
// so L = Σ_i w_i Σ_t m_t·ℓ_t and dL/dx_t = w_i·m_t·dℓ_t/dx_t.
type AggMode string

// UnmarshalText accepts only the four modes, so a bad loss_agg_mode fails
// when the config is read.
func (m *AggMode) UnmarshalText(b []byte) error {
	v, err := ParseAggMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalText writes the mode's name.
func (m AggMode) MarshalText() ([]byte, error) { return []byte(m), nil }

// The aggregation modes, with verl's names.
const (
	// TokenMean: Σ m·ℓ / (masked tokens in the mini-batch).
	TokenMean AggMode = "token-mean"
	// SeqMeanTokenSum: Σ_i Σ_t m·ℓ / (sequences with a masked token).
	SeqMeanTokenSum AggMode = "seq-mean-token-sum"
	// SeqMeanTokenMean: Σ_i [Σ_t m·ℓ / (Σ_t m + 1e-8)] / (sequences with a masked token).
	SeqMeanTokenMean AggMode = "seq-mean-token-mean"
	// SeqMeanTokenSumNorm (Dr.GRPO): Σ_i Σ_t m·ℓ / L_norm, L_norm a constant length.
	SeqMeanTokenSumNorm AggMode = "seq-mean-token-sum-norm"
)

// ParseAggMode returns the mode named s.
func ParseAggMode(s string) (AggMode, error) {
	switch m := AggMode(s); m {
	case TokenMean, SeqMeanTokenSum, SeqMeanTokenMean, SeqMeanTokenSumNorm:
		return m, nil
	}
	return "", fmt.Errorf("rl: unknown loss aggregation mode %q (want token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm)", s)
}

// Norm is the denominator of an aggregation, counted once over a whole
// mini-batch. A loss computed on each micro-batch with the mini-batch's Norm
// gives per-micro-batch losses and gradients that sum to the mini-batch's, so
// gradient accumulation needs no further scaling (verl's global token and
// sequence counts).
type Norm struct {
	Mode   AggMode
	Tokens float64 // masked tokens in the mini-batch (token-mean)
	Seqs   float64 // sequences with at least one masked token (seq-mean-*)
	Length float64 // L_norm of seq-mean-token-sum-norm
}

// NewNorm counts the normaliser of mode over mini's ActionMask.
// lossScaleFactor is seq-mean-token-sum-norm's L_norm; when it is 0 the
// longest response of mini (sequence minus prompt; the whole sequence when
// PromptLen is nil) stands in for verl's padded response length. Dr.GRPO
// wants a constant: set it to the configured maximum response length.
func NewNorm(mode AggMode, mini *Batch, lossScaleFactor float64) (Norm, error) {
	if _, err := ParseAggMode(string(mode)); err != nil {
		return Norm{}, err
	}
	if err := mini.Validate(FieldActionMask); err != nil {
		return Norm{}, err
	}
	n := Norm{Mode: mode, Length: lossScaleFactor}
	for i := 0; i < mini.NumSeqs(); i++ {
		s, e := mini.Seq(i)
		k := 0
		for t := s; t < e; t++ {
			if mini.ActionMask[t] {
				k++
			}
		}
		n.Tokens += float64(k)
		if k > 0 {
			n.Seqs++
		}
		resp := e - s
		if mini.PromptLen != nil {
			resp -= mini.PromptLen[i]
		}
		if lossScaleFactor == 0 && float64(resp) > n.Length {
			n.Length = float64(resp)
		}
	}
	return n, n.check()
}

func (n Norm) check() error {
	var d float64
	switch n.Mode {
	case TokenMean:
		d = n.Tokens
	case SeqMeanTokenSum, SeqMeanTokenMean:
		d = n.Seqs
	case SeqMeanTokenSumNorm:
		d = n.Length
	default:
		_, err := ParseAggMode(string(n.Mode))
		return err
	}
	if !(d > 0) {
		return fmt.Errorf("rl: %s aggregation over a mini-batch with no action tokens (Tokens %v, Seqs %v, Length %v)", n.Mode, n.Tokens, n.Seqs, n.Length)
	}
	return nil
}

// SeqWeights returns w_i for each sequence of b (a micro-batch of the
// mini-batch n was counted on), written into dst when it is large enough.
func (n Norm) SeqWeights(b *Batch, dst []float64) ([]float64, error) {
	if err := n.check(); err != nil {
		return nil, err
	}
	S := b.NumSeqs()
	if cap(dst) < S {
		dst = make([]float64, S)
	}
	dst = dst[:S]
	for i := range dst {
		switch n.Mode {
		case TokenMean:
			dst[i] = 1 / n.Tokens
		case SeqMeanTokenSum:
			dst[i] = 1 / n.Seqs
		case SeqMeanTokenSumNorm:
			dst[i] = 1 / n.Length
		case SeqMeanTokenMean:
			s, e := b.Seq(i)
			k := 0
			for t := s; t < e; t++ {
				if b.ActionMask[t] {
					k++
				}
			}
			dst[i] = 1 / (n.Seqs * (float64(k) + maskEps))
		}
	}
	return dst, nil
}
