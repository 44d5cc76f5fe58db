package main

import (
	"fmt"

	"github.com/r1go/r1go/rl"
)

// The per-turn rollout mismatch of a dumped trajectory (rl.TurnMismatch,
// the sampler's log-probs against the trainer's on the same tokens): each
// action span is one model turn, so the k-th action span shows the k-th
// figure, and the list shows the turn where the trajectory's mismatch is
// largest.

// turnMismatchText is the k-th turn's figures, or "" when the dump has none.
func turnMismatchText(r rl.DumpRecord, k int) string {
	if k >= len(r.Mismatch) {
		return ""
	}
	m := r.Mismatch[k]
	return fmt.Sprintf("; sampler vs trainer: k1 %.3g, k3 %.3g, |Δp| mean %.3g max %.3g", m.KL, m.K3, m.ProbDiffMean, m.ProbDiffMax)
}

// worstTurnText names the turn with the largest k3 estimate.
func worstTurnText(r rl.DumpRecord) string {
	if len(r.Mismatch) == 0 {
		return ""
	}
	w := 0
	for k, m := range r.Mismatch {
		if m.K3 > r.Mismatch[w].K3 {
			w = k
		}
	}
	return fmt.Sprintf("  mismatch k3 %.2g (turn %d of %d)", r.Mismatch[w].K3, w+1, len(r.Mismatch))
}
