package plan

import (
	"fmt"
	"strings"

	"github.com/r1go/r1go/model"
)

// Advice lists the settings that would make a plan that does not fit fit:
// each single change that is enough on its own (recomputation, the largest
// micro-batch, rollout slot count or context that fits, ZeRO-1 or 2 and
// sharded master weights in a data-parallel run), or, when none is,
// one combination of them. Only settings the run really has are named.
func (p *Plan) Advice(cfg *model.Config) []string {
	s := p.Settings
	fits := func(t Settings) bool {
		q, err := New(cfg, t)
		return err == nil && q.Fits()
	}
	var singles []string
	if s.Train && s.Ranks > 1 && !s.Zero1 && s.Zero < 1 && s.key("zero1") != "" {
		t := s
		t.Zero1 = true
		if fits(t) {
			singles = append(singles, s.key("zero1")+"=true")
		}
	}
	if s.Train && s.Ranks > 1 && s.stage() < 2 && s.key("zero") != "" {
		t, one := s, s
		t.Zero, one.Zero1 = 2, true
		if fits(t) && !fits(one) { // where stage 1 is enough, dp.zero1 is named
			singles = append(singles, s.key("zero")+"=2")
		}
	}
	if s.Train && s.Ranks > 1 && s.Device == "cuda" && s.Precision == "bf16-mixed" && !s.CUDAPaging && !s.CUDANoVMM && s.LoRARank == 0 && s.key("shard_masters") != "" {
		t := s
		t.CUDAPaging = true
		if t.stage() < 1 {
			t.Zero = 2
		}
		if fits(t) {
			v := s.key("shard_masters") + "=true"
			if s.stage() < 1 {
				v = s.key("zero") + "=2 " + v
			}
			singles = append(singles, v)
		}
	}
	if s.Train && !s.Recompute && s.key("recompute") != "" {
		t := s
		t.Recompute = true
		if fits(t) {
			singles = append(singles, s.key("recompute")+"=true")
		}
	}
	if v, ok := s.largestMicroBatch(fits); ok && s.key("micro_batch") != "" {
		singles = append(singles, fmt.Sprintf("%s=%d", s.key("micro_batch"), v))
	}
	if v, ok := s.largestSlots(fits); ok && s.key("slots") != "" {
		singles = append(singles, fmt.Sprintf("%s=%d", s.key("slots"), v))
	}
	if len(singles) > 0 {
		return singles
	}
	// Together: the smallest useful micro-batch, recomputation where the
	// model would still save every layer at it (above the automatic bound
	// it recomputes anyway), then the most slots that fit.
	t := s
	var parts []string
	if t.MicroBatchTokens > max(t.MaxContext, 1) && s.key("micro_batch") != "" {
		t.MicroBatchTokens = max(t.MaxContext, 1)
		parts = append(parts, fmt.Sprintf("%s=%d", s.key("micro_batch"), t.MicroBatchTokens))
	}
	if t.Train && !t.Recompute && s.key("recompute") != "" && shapeOf(cfg).saves(max(t.MicroBatchTokens, t.MaxContext), false, t.SaveBytes) {
		t.Recompute = true
		parts = append(parts, s.key("recompute")+"=true")
	}
	if fits(t) {
		return []string{strings.Join(parts, " ")}
	}
	if v, ok := t.largestSlots(fits); ok && s.key("slots") != "" {
		parts = append(parts, fmt.Sprintf("%s=%d", s.key("slots"), v))
		return []string{strings.Join(parts, " ")}
	}
	return nil
}

// largestMicroBatch halves the micro-batch down to the context length and
// returns the first value that fits.
func (s Settings) largestMicroBatch(fits func(Settings) bool) (int, bool) {
	if s.MicroBatchTokens <= max(s.MaxContext, 1) {
		return 0, false
	}
	t := s
	for v := s.MicroBatchTokens / 2; ; v /= 2 {
		v = max(v, s.MaxContext, 1)
		t.MicroBatchTokens = v
		if fits(t) {
			return v, true
		}
		if v <= max(s.MaxContext, 1) {
			return 0, false
		}
	}
}

// largestSlots finds the most rollout slots, a multiple of the group size
// and at least one group, that fit.
func (s Settings) largestSlots(fits func(Settings) bool) (int, bool) {
	g := max(s.GroupSize, 1)
	if s.RolloutSlots <= g {
		return 0, false
	}
	// An evaluation's slots are rollout.slots too (capped by its
	// questions): the advised number caps them.
	with := func(groups int) Settings {
		t := s
		t.RolloutSlots = groups * g
		t.EvalSlots = min(s.EvalSlots, t.RolloutSlots)
		return t
	}
	lo, hi := 1, (s.RolloutSlots-1)/g // groups: lo fits?, hi the most below now
	if !fits(with(lo)) {
		return 0, false
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(with(mid)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo * g, true
}
