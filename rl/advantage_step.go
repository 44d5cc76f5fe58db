package rl

import (
	"fmt"
	"math"
)

// Per-turn credit: estimators over the steps of a trajectory (its model
// turns) rather than its tokens. They read the trajectories and turns of a
// batch through steps(): the sequences of a trajectory (Batch.Traj) in
// order, and in them the runs of action tokens, one per turn. They work on
// whole trajectories too, where a trajectory is one sequence and its turns
// are its action runs.
//
// Notation: trajectory j has turns k = 0 … T_j−1; r_{j,k} is the turn's
// reward, the sum of Rewards over its credited tokens (outcome on the last
// turn's last action token, process rewards at the end of each turn); γ
// and λ act per turn, not per token.
//
//	step_gae   (Agent-R1 v0.1.0's compute_gae_advantage_return)
//	           V_{j,k} = critic value at the turn's first action token (the
//	                     state after the last prompt token), V_{j,T_j} = 0
//	           δ_{j,k} = r_{j,k} + γ·V_{j,k+1} − V_{j,k}
//	           A_{j,k} = δ_{j,k} + γλ·A_{j,k+1},  A_{j,T_j} = 0
//	           R_{j,k} = A_{j,k} + V_{j,k}        (before whitening)
//	           Â = (A − mean A) / (std A + 1e-8) over every turn of the
//	               batch, each turn once (std with N−1), not token-weighted
//	step_grpo  G_{j,k} = Σ_{m≥k} γ^{m−k} r_{j,m}   (reward to go, per turn)
//	           μ_g, σ_g: mean and std (N−1) of G_{j,0} over the group's
//	                     trajectories, each trajectory once
//	           A_{j,k} = (G_{j,k} − μ_g) / (σ_g + 1e-6)  (norm_adv_by_std_in_grpo;
//	                     a group of one: μ 0, σ 1, as grpo)
//	step_rloo  A_{j,k} = G_{j,k} − 1/(n−1)·Σ_{i≠j} G_{i,0}  (n trajectories
//	                     in the group; a group of one: G_{j,k})
//
// Both baselines count each trajectory once, whatever its number of
// turns. A mean over turns would weight a trajectory by its turn count;
// the count depends on the trajectory's own actions, so such a baseline
// would correlate with them and bias the gradient. step_rloo's baseline is
// the other trajectories' alone, independent of trajectory j, so its
// gradient estimate is unbiased; step_grpo's includes j as GRPO's does (a
// (n−1)/n shrink of the gradient with the std left out). With outcome
// rewards only and γ = 1 every turn of a trajectory gets G_{j,k} = its
// outcome, and step_grpo and step_rloo give grpo's and rloo's advantages.
// Returns are the advantages (step_gae: R above), broadcast like them to
// every credited token of the turn.

func init() {
	RegisterEstimator("step_gae", StepGAE, Needs{Values: true, Trajectories: true})
	RegisterEstimator("step_grpo", StepGRPO, Needs{Trajectories: true})
	RegisterEstimator("step_rloo", StepRLOO, Needs{Trajectories: true})
}

// stepSpan is one turn in a packed batch: tokens [lo, hi), from after the
// previous turn's last action token (or the sequence's start) through its
// own last action token, the last turn of a sequence running to the
// sequence's end; first and last are its first and last action tokens.
type stepSpan struct{ lo, hi, first, last int }

// trajIndex maps each sequence to a trajectory numbered 0, 1, … in order
// of first appearance (each sequence its own when Traj is nil) and checks
// that a trajectory's sequences are consecutive.
func (b *Batch) trajIndex() (of []int, n int, err error) {
	S := b.NumSeqs()
	of = make([]int, S)
	if b.Traj == nil {
		for i := range of {
			of[i] = i
		}
		return of, S, nil
	}
	if len(b.Traj) != S {
		return nil, 0, fmt.Errorf("rl: Traj has %d entries, want %d (one per sequence)", len(b.Traj), S)
	}
	seen := map[int]bool{}
	for i, id := range b.Traj {
		if i > 0 && id == b.Traj[i-1] {
			of[i] = n - 1
			continue
		}
		if seen[id] {
			return nil, 0, fmt.Errorf("rl: the sequences of trajectory %d are not consecutive (sequence %d)", id, i)
		}
		seen[id] = true
		of[i] = n
		n++
	}
	return of, n, nil
}

// Trajectories is the number of trajectories b packs: its sequences, or
// in step mode (Traj) the runs of sequences that share a trajectory.
func (b *Batch) Trajectories() (int, error) {
	_, n, err := b.trajIndex()
	return n, err
}

// steps returns each trajectory's turns in order.
func (b *Batch) steps() ([][]stepSpan, error) {
	of, n, err := b.trajIndex()
	if err != nil {
		return nil, err
	}
	out := make([][]stepSpan, n)
	m := b.ActionMask
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		lo := s
		var seq []stepSpan
		for t := s; t < e; {
			if !m[t] {
				t++
				continue
			}
			first := t
			for t < e && m[t] {
				t++
			}
			seq = append(seq, stepSpan{lo: lo, hi: t, first: first, last: t - 1})
			lo = t
		}
		if len(seq) > 0 {
			seq[len(seq)-1].hi = e
		}
		out[of[i]] = append(out[of[i]], seq...)
	}
	return out, nil
}

// stepRewards returns r_{j,k}: the sum of Rewards over each turn's
// credited tokens.
func (b *Batch) stepRewards(tab [][]stepSpan) ([][]float64, error) {
	out := make([][]float64, len(tab))
	var bad float64
	for j, st := range tab {
		out[j] = make([]float64, len(st))
		for k, sp := range st {
			for t := sp.lo; t < sp.hi; t++ {
				if b.AdvantageMask[t] {
					out[j][k] += b.Rewards[t]
					bad += b.Rewards[t] - b.Rewards[t]
				}
			}
		}
	}
	if bad != 0 {
		return nil, b.firstNonFiniteUnder(b.AdvantageMask, FieldRewards)
	}
	return out, nil
}

// broadcastSteps writes each turn's advantage and return onto its
// credited tokens and 0 elsewhere.
func (b *Batch) broadcastSteps(tab [][]stepSpan, adv, ret [][]float64) {
	clear(b.Advantages)
	clear(b.Returns)
	for j, st := range tab {
		for k, sp := range st {
			for t := sp.lo; t < sp.hi; t++ {
				if b.AdvantageMask[t] {
					b.Advantages[t], b.Returns[t] = adv[j][k], ret[j][k]
				}
			}
		}
	}
}

// StepGAE is Agent-R1's step-level GAE (formulas above). Reads Rewards,
// OldValues, ActionMask, AdvantageMask, Traj.
func StepGAE(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldActionMask, FieldAdvantageMask, FieldRewards, FieldOldValues); err != nil {
		return err
	}
	if err := checkGamma(cfg); err != nil {
		return err
	}
	tab, err := b.steps()
	if err != nil {
		return err
	}
	r, err := b.stepRewards(tab)
	if err != nil {
		return err
	}
	b.outputs()
	adv, ret := make([][]float64, len(tab)), make([][]float64, len(tab))
	var sum float64
	n := 0
	for j, st := range tab {
		adv[j], ret[j] = make([]float64, len(st)), make([]float64, len(st))
		nextV, a := 0.0, 0.0
		for k := len(st) - 1; k >= 0; k-- {
			v := b.OldValues[st[k].first]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return b.badValue(string(FieldOldValues), st[k].first, v, false)
			}
			a = r[j][k] + cfg.Gamma*nextV - v + cfg.Gamma*cfg.Lambda*a
			adv[j][k], ret[j][k] = a, a+v
			nextV = v
			sum += a
			n++
		}
	}
	if n < 2 {
		return fmt.Errorf("rl: step_gae whitens over turns and needs at least 2, the batch has %d", n)
	}
	mean := sum / float64(n)
	var ss float64
	for _, st := range adv {
		for _, a := range st {
			ss += (a - mean) * (a - mean)
		}
	}
	std := math.Sqrt(ss / float64(n-1))
	for _, st := range adv {
		for k := range st {
			st[k] = (st[k] - mean) / (std + 1e-8)
		}
	}
	b.broadcastSteps(tab, adv, ret)
	return nil
}

// stepReturns returns G_{j,k}, the discounted reward to go of each turn,
// with the batch's turn table.
func (b *Batch) stepReturns(cfg *AdvantageConfig) ([][]stepSpan, [][]float64, error) {
	if err := b.require(FieldActionMask, FieldAdvantageMask, FieldRewards, FieldGroup); err != nil {
		return nil, nil, err
	}
	if err := checkGamma(cfg); err != nil {
		return nil, nil, err
	}
	tab, err := b.steps()
	if err != nil {
		return nil, nil, err
	}
	G, err := b.stepRewards(tab)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range G {
		for k := len(g) - 2; k >= 0; k-- {
			g[k] += cfg.Gamma * g[k+1]
		}
	}
	b.outputs()
	return tab, G, nil
}

// trajGroups lists the trajectories of each group id in first-seen order:
// trajectory j's group is its first sequence's.
func (b *Batch) trajGroups(of []int, n int) [][]int {
	gid := make([]int, n)
	seen := make([]bool, n)
	for i, j := range of {
		if !seen[j] {
			gid[j], seen[j] = b.Group[i], true
		}
	}
	idx := map[int]int{}
	var gs [][]int
	for j, g := range gid {
		k, ok := idx[g]
		if !ok {
			k = len(gs)
			idx[g] = k
			gs = append(gs, nil)
		}
		gs[k] = append(gs[k], j)
	}
	return gs
}

// first returns G_{j,0} of each trajectory, 0 for one without a turn.
func first(G [][]float64) []float64 {
	out := make([]float64, len(G))
	for j, g := range G {
		if len(g) > 0 {
			out[j] = g[0]
		}
	}
	return out
}

// StepGRPO is the group-relative advantage per turn (formulas above).
// Reads Rewards, ActionMask, AdvantageMask, Group, Traj.
func StepGRPO(b *Batch, cfg *AdvantageConfig) error {
	tab, G, err := b.stepReturns(cfg)
	if err != nil {
		return err
	}
	of, n, _ := b.trajIndex()
	g0 := first(G)
	adv := make([][]float64, len(G))
	for _, g := range b.trajGroups(of, n) {
		mean, div := 0.0, singletonDivisor
		if len(g) > 1 {
			var std float64
			mean, std = meanStd(g0, g)
			div = std + grpoEps
		}
		for _, j := range g {
			adv[j] = make([]float64, len(G[j]))
			for k, x := range G[j] {
				adv[j][k] = x - mean
				if cfg.NormAdvByStd {
					adv[j][k] /= div
				}
			}
		}
	}
	b.broadcastSteps(tab, adv, adv)
	return nil
}

// StepRLOO is the leave-one-out advantage per turn (formulas above).
// Reads Rewards, ActionMask, AdvantageMask, Group, Traj.
func StepRLOO(b *Batch, cfg *AdvantageConfig) error {
	tab, G, err := b.stepReturns(cfg)
	if err != nil {
		return err
	}
	of, n, _ := b.trajIndex()
	g0 := first(G)
	adv := make([][]float64, len(G))
	for _, g := range b.trajGroups(of, n) {
		var total float64
		for _, j := range g {
			total += g0[j]
		}
		for _, j := range g {
			base := 0.0
			if len(g) > 1 {
				base = (total - g0[j]) / float64(len(g)-1)
			}
			adv[j] = make([]float64, len(G[j]))
			for k, x := range G[j] {
				adv[j][k] = x - base
			}
		}
	}
	b.broadcastSteps(tab, adv, adv)
	return nil
}
