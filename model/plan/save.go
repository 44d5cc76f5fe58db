package plan

import "github.com/r1go/r1go/model"

// KeepHeadroom is the share of a GPU's memory that a plan keeping every
// layer's activations may fill (KeepLayers): the rest absorbs the CUDA
// allocator's and the driver's overheads that the plan does not itemise.
const KeepHeadroom = 0.85

// KeepLayers raises s.SaveBytes to the saved layer activations of the
// plan's largest training micro-batch when the plan that keeps them fits
// KeepHeadroom of a CUDA device's capacity, and returns that plan; else
// it returns s and p unchanged. Keeping them spares the backward a second
// forward of every layer (model.Model.SaveBytes; the automatic 1 GiB
// bound is for the CPU, where memory is what runs out). Nothing changes
// with recomputation asked for, without training, on the CPU, or with an
// unknown capacity.
func KeepLayers(cfg *model.Config, s Settings, p *Plan) (Settings, *Plan) {
	if s.Device != "cuda" || !s.Train || s.Recompute || s.Capacity <= 0 {
		return s, p
	}
	T := s.largestBatch()
	sh := shapeOf(cfg)
	need := sh.savedLayerBytes(T)
	if sh.saves(T, false, s.SaveBytes) || need <= s.SaveBytes {
		return s, p // saved already
	}
	t := s
	t.SaveBytes = need
	q, err := New(cfg, t)
	if err != nil || float64(q.Total()) > KeepHeadroom*float64(s.Capacity) {
		return s, p
	}
	return t, q
}
