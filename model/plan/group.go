package plan

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Grouped forwards. A Forward of a long batch that does not save every
// layer (scoring, or training with recomputation) runs in groups of whole
// sequences (model's groupTokens and groupSpans): only what spans the whole
// batch is held for all T rows (the training residuals, the final norm,
// the head's outputs, the residual gradient), and one group's layer
// activations and backward scratch at a time. A KV-cache step never
// groups (stepBytes keeps actBytes).

// groupRows bounds the rows of the group arena of a Forward of T tokens,
// or is 0 when the Forward runs whole: when it saves any layer, when
// its scratch fits model.GroupBytes, or when one sequence may fill the
// batch (T ≤ MaxContext; a batch of one sequence never groups). A group
// holds at most maxT tokens, or one sequence (≤ MaxContext) that is
// longer, plus fewer than model.MinGroupRows rows of short sequences joined on
// either side.
func (s Settings) groupRows(sh shape, T int, nsaved int, train bool) int {
	if nsaved > 0 || s.MaxContext <= 0 || T <= s.MaxContext {
		return 0
	}
	maxT := model.GroupTokens(sh.cfg, T, train)
	if maxT == 0 {
		return 0
	}
	return min(T, max(maxT, s.MaxContext+model.MinGroupRows)+model.MinGroupRows)
}

// arenaVals is the values of an arena cut as c (model.ActivationLayout),
// and the part of them in compute storage under mixed precision (the
// residuals and the layers' matmul and attention tensors). With views
// (mixed precision: model's gradViews) the backward scratch keeps dgu in
// compute storage beside compute views of the residual gradient and dqkv.
func (sh shape) arenaVals(c model.ActivationCut, views bool) (all, compute int64) {
	f32, comp := model.ActivationLayout(sh.cfg, c, true, views)
	return int64(f32 + comp), int64(comp)
}

// gradViews says whether arenas keep gradient views in compute storage
// (model's gradViews): the CUDA device does in mixed precision.
func (s Settings) gradViews() bool { return s.Precision == "bf16-mixed" }

// bytesOf is the bytes of all values, compute of them in the compute
// dtype: bf16 under mixed precision, float32 otherwise.
func (s Settings) bytesOf(all, compute int64) int64 {
	if s.Precision != "bf16-mixed" {
		return all * 4
	}
	return (all-compute)*4 + compute*2
}

// forwardBytes is what a Forward of T tokens holds (a training one with
// train): the whole arena (actBytes), or for a grouped Forward the arena
// of the whole batch (model's cutGrouped: with train the L+1 residuals
// in compute storage, the residual gradient and the head's gradients;
// always the final norm and the head's outputs) and one group's arena of
// groupRows rows (with train, its backward scratch and no residuals of
// its own: they are views into the whole batch's).
func (s Settings) forwardBytes(sh shape, T int, nsaved int, train bool) int64 {
	rows := s.groupRows(sh, T, nsaved, train)
	if rows == 0 {
		return s.actBytes(sh, T, nsaved, train)
	}
	whole := model.ActivationCut{T: T, Grouped: true}
	group := model.ActivationCut{T: rows, Residuals: 2}
	if train {
		whole.Residuals, whole.BackwardRows = sh.L+1, T
		group.Residuals, group.BackwardRows = 0, rows
	}
	return s.bytesOf(sh.arenaVals(whole, s.gradViews())) + s.bytesOf(sh.arenaVals(group, s.gradViews()))
}

// groupDetail names the group size of a grouped Forward.
func (s Settings) groupDetail(sh shape, T int, nsaved int, train bool) string {
	if rows := s.groupRows(sh, T, nsaved, train); rows > 0 {
		return fmt.Sprintf(", in groups of sequences (≤ %d tokens)", rows)
	}
	return ""
}
