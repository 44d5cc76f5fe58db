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

// minGroupRows mirrors the model package's fewest rows of a group: short
// sequences join their neighbours until a group has this many.
const minGroupRows = 16

// groupRows bounds the rows of the group arena of a Forward of T tokens,
// or is 0 when the Forward runs whole: when it saves any layer, when
// its scratch fits model.GroupBytes, or when one sequence may fill the
// batch (T ≤ MaxContext; a batch of one sequence never groups). A group
// holds at most maxT tokens, or one sequence (≤ MaxContext) that is
// longer, plus fewer than minGroupRows rows of short sequences joined on
// either side.
func (s Settings) groupRows(sh shape, T int, nsaved int, train bool) int {
	if nsaved > 0 || s.MaxContext <= 0 || T <= s.MaxContext {
		return 0
	}
	C, QKV, Q, I := int64(sh.C), int64(sh.QKV), int64(sh.Q), int64(sh.I)
	per := sh.layerActs(1) + 2*C
	if sh.qkNorm {
		per += 2 * QKV
	}
	if train {
		per += 2*C + QKV + Q + 3*I
	}
	if int64(T)*per*4 <= int64(model.GroupBytes) {
		return 0
	}
	maxT := max(1, int(int64(model.GroupBytes)/(per*4)))
	return min(T, max(maxT, s.MaxContext+minGroupRows)+minGroupRows)
}

// arenaVals is the values of an arena cut as model's cutActivations cuts
// it: T rows, nx residuals, nl layer sets, tb rows of backward scratch; and
// the part of them in compute storage under mixed precision (the
// residuals and the layers' matmul and attention tensors).
//
// With views (mixed precision: model's gradViews) the backward scratch
// keeps dgu in compute storage beside compute views of the residual
// gradient and dqkv.
func (sh shape) arenaVals(T, nx, nl, tb int, views bool) (all, compute int64) {
	t, C, I := int64(T), int64(sh.C), int64(sh.I)
	QKV, Q, b := int64(sh.QKV), int64(sh.Q), int64(tb)
	all = int64(nx)*t*C + int64(nl)*sh.layerActs(T) + 2*t*C + t + 4*t + b*(2*C+QKV+Q+3*I+3)
	if sh.qkNorm {
		all += 2 * t * QKV
	}
	compute = int64(nx)*t*C + int64(nl)*sh.layerCompute(T)
	if views {
		all += b * (C + QKV)
		compute += b * (C + 2*I + QKV)
	}
	return all, compute
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
	t, C := int64(T), int64(sh.C)
	nx, tb, nxg, tbg := int64(0), int64(0), 2, 0
	if train {
		nx, tb, nxg, tbg = int64(sh.L+1), t, 0, rows
	}
	whole, wc := nx*t*C+t*C+t+4*t+tb*C+3*tb, nx*t*C
	if s.gradViews() { // the residual gradient's compute view
		whole, wc = whole+tb*C, wc+tb*C
	}
	ga, gc := sh.arenaVals(rows, nxg, 1, tbg, s.gradViews())
	return s.bytesOf(whole, wc) + s.bytesOf(ga, gc)
}

// groupDetail names the group size of a grouped Forward.
func (s Settings) groupDetail(sh shape, T int, nsaved int, train bool) string {
	if rows := s.groupRows(sh, T, nsaved, train); rows > 0 {
		return fmt.Sprintf(", in groups of sequences (≤ %d tokens)", rows)
	}
	return ""
}
