package rl

import (
	"fmt"
	"math"
)

// AdvantageConfig holds the estimator's hyperparameters. Its yaml keys are
// verl's algorithm.* keys: AlgorithmConfig embeds it.
type AdvantageConfig struct {
	Estimator    string  `yaml:"adv_estimator" help:"gae (PPO with a critic), grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline, or a registered estimator"`
	Gamma        float64 `yaml:"gamma" help:"discount"`
	Lambda       float64 `yaml:"lam" help:"GAE lambda"`
	NormAdvByStd bool    `yaml:"norm_adv_by_std_in_grpo" help:"GRPO divides by the group std (false: Dr.GRPO)"`
}

// DefaultAdvantageConfig returns verl's defaults (DefaultTrainerConfig
// picks Agent-R1's GRPO).
func DefaultAdvantageConfig() AdvantageConfig {
	return AdvantageConfig{Estimator: "gae", Gamma: 1, Lambda: 1, NormAdvByStd: true}
}

// Validate reports an unknown estimator or a discount outside [0, 1].
func (c *AdvantageConfig) Validate() error {
	if _, err := LookupEstimator(c.Estimator); err != nil {
		return fmt.Errorf("adv_estimator: %w", err)
	}
	if !(c.Gamma >= 0 && c.Gamma <= 1) || !(c.Lambda >= 0 && c.Lambda <= 1) {
		return fmt.Errorf("gamma %v and lam %v must lie in [0, 1]", c.Gamma, c.Lambda)
	}
	return nil
}

// An Estimator reads a Batch (Rewards, AdvantageMask, and per estimator
// OldValues, Group or BaselineScore) and writes b.Advantages and b.Returns,
// reusing their storage when it is large enough. Both are 0 wherever the
// advantage mask is false.
type Estimator func(b *Batch, cfg *AdvantageConfig) error

// Estimate runs the estimator that cfg.Estimator names. A batch that packs
// a trajectory as several sequences (Batch.Traj) goes only to an estimator
// whose Needs say it credits trajectories.
func Estimate(b *Batch, cfg *AdvantageConfig) error {
	e, err := LookupEstimator(cfg.Estimator)
	if err != nil {
		return err
	}
	if needs, _ := EstimatorNeeds(cfg.Estimator); !needs.Trajectories {
		if i := b.splitTrajectory(); i >= 0 {
			return fmt.Errorf("rl: adv_estimator %s credits each packed sequence as a trajectory, and trajectory %d spans several (rollout.trajectory=step with a context that rewrites, or merge_prefix off): use one that credits trajectories (%s)",
				cfg.Estimator, i, trajectoryEstimators())
		}
	}
	return e(b, cfg)
}

// splitTrajectory returns the first trajectory packed as several
// sequences, or −1.
func (b *Batch) splitTrajectory() int {
	for i := 1; i < len(b.Traj); i++ {
		if b.Traj[i] == b.Traj[i-1] {
			return b.Traj[i]
		}
	}
	return -1
}

func init() {
	RegisterEstimator("gae", GAE, Needs{Values: true})
	RegisterEstimator("grpo", GRPO, Needs{Trajectories: true})
	RegisterEstimator("rloo", RLOO, Needs{Trajectories: true})
	RegisterEstimator("reinforce_plus_plus", ReinforcePlusPlus, Needs{})
	RegisterEstimator("reinforce_plus_plus_baseline", ReinforcePlusPlusBaseline, Needs{Trajectories: true})
	RegisterEstimator("remax", ReMax, Needs{Baseline: true})
}

// outputs sizes Advantages and Returns to N; the estimators write every
// entry (0 off the mask), so there is no zeroing pass.
func (b *Batch) outputs() {
	n := b.NumTokens()
	b.Advantages = sized(b.Advantages, n)
	b.Returns = sized(b.Returns, n)
}

func sized(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	return x[:n]
}

func zeroed(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	x = x[:n]
	clear(x)
	return x
}

// GAE is generalised advantage estimation over the advantage mask. Walking
// each sequence backwards, δ_t = r_t + γ·V_next − V_t and Â ← δ_t + γλ·Â at
// masked tokens; unmasked tokens (tool output, chat markup) leave V_next and Â
// untouched, so the bootstrap value for a model token is the value at the next
// model token and environment tokens are skipped (Agent-R1's aligned
// advantages; verl's GAE does the same). After the last model token the next
// value is 0. Returns are Â + V before whitening; the advantages are then
// whitened over the mask. With AdvantageMask set to every response token
// (ResponseMask) this is the "advantage mask disabled" ablation.
// Reads Rewards, OldValues, AdvantageMask.
func GAE(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards, FieldOldValues); err != nil {
		return err
	}
	if err := checkGamma(cfg); err != nil {
		return err
	}
	b.outputs()
	m, r, v, A, R := b.AdvantageMask, b.Rewards, b.OldValues, b.Advantages, b.Returns
	var sum, bad float64
	n := 0
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		nextV, adv := 0.0, 0.0
		for t := e - 1; t >= s; t-- {
			if !m[t] {
				A[t], R[t] = 0, 0
				continue
			}
			bad += r[t] - r[t] + v[t] - v[t]
			delta := r[t] + cfg.Gamma*nextV - v[t]
			adv = delta + cfg.Gamma*cfg.Lambda*adv
			nextV = v[t]
			A[t], R[t] = adv, adv+v[t]
			sum += adv
			n++
		}
	}
	if bad != 0 {
		return b.firstNonFiniteUnder(m, FieldRewards, FieldOldValues)
	}
	return whitenWith(A, m, sum, n, "GAE advantages")
}

// trajScores returns s_j = Σ_t r_t·m_t per trajectory, over its sequences
// in order (each sequence its own trajectory when Batch.Traj is nil), with
// each sequence's trajectory and the trajectories of each group: the
// outcome score counts only rewards on credited tokens (Agent-R1's choice;
// rewards live on model tokens), and a trajectory of several sequences is
// one sample of its group, as in Agent-R1's trajectory-level GRPO.
func trajScores(b *Batch) (sc []float64, of []int, gs [][]int, err error) {
	of, n, err := b.trajIndex()
	if err != nil {
		return nil, nil, nil, err
	}
	sc = make([]float64, n)
	var bad float64
	for i, j := range of {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			if b.AdvantageMask[t] {
				sc[j] += b.Rewards[t]
				bad += b.Rewards[t] - b.Rewards[t]
			}
		}
	}
	if bad != 0 {
		return nil, nil, nil, b.firstNonFiniteUnder(b.AdvantageMask, FieldRewards)
	}
	return sc, of, b.trajGroups(of, n), nil
}

// perSeq spreads per-trajectory values over the sequences.
func perSeq(adv []float64, of []int) []float64 {
	out := make([]float64, len(of))
	for i, j := range of {
		out[i] = adv[j]
	}
	return out
}

// broadcast writes per-sequence advantages onto the masked tokens and 0
// elsewhere, into Advantages and Returns, and returns their masked sum and
// count (for whitening).
func (b *Batch) broadcast(adv []float64) (sum float64, n int) {
	m, A, R := b.AdvantageMask, b.Advantages, b.Returns
	for i, a := range adv {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			x := 0.0
			if m[t] {
				x = a
				sum += a
				n++
			}
			A[t], R[t] = x, x
		}
	}
	return sum, n
}

// grpoEps is verl's epsilon added to the group std.
const grpoEps = 1e-6

// singletonDivisor is verl's σ + ε for a group of one: σ is the float32 1.0
// and the sum is rounded to float32, so the divisor is float32(1 + 1e-6).
// Kept bit-for-bit so single-sample groups match verl.
var singletonDivisor = float64(float32(1 + grpoEps))

// GRPO is the group-relative outcome advantage: s_i minus the group mean,
// divided by the group's sample std (N−1) + 1e-6 when cfg.NormAdvByStd
// (Dr.GRPO leaves the std out). A group of one has mean 0 and std 1.
// The advantage is broadcast over the sequence's masked tokens; returns equal
// advantages. s_i is a trajectory's score: a trajectory packed as several
// sequences (step mode, Batch.Traj) is one member of its group with the
// sum of its sequences' rewards, Agent-R1's trajectory-level GRPO; RLOO and
// REINFORCE++-baseline count trajectories the same way (trajScores).
// Reads Rewards, AdvantageMask, Group, Traj.
func GRPO(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards, FieldGroup); err != nil {
		return err
	}
	b.outputs()
	sc, of, gs, err := trajScores(b)
	if err != nil {
		return err
	}
	adv := make([]float64, len(sc))
	for _, g := range gs {
		if len(g) == 1 {
			adv[g[0]] = sc[g[0]]
			if cfg.NormAdvByStd {
				adv[g[0]] /= singletonDivisor
			}
			continue
		}
		mean, std := meanStd(sc, g)
		for _, i := range g {
			adv[i] = sc[i] - mean
			if cfg.NormAdvByStd {
				adv[i] /= std + grpoEps
			}
		}
	}
	b.broadcast(perSeq(adv, of))
	return nil
}

// meanStd returns the mean and the sample (N−1) standard deviation of x over
// the indices g (len(g) ≥ 2).
func meanStd(x []float64, g []int) (mean, std float64) {
	for _, i := range g {
		mean += x[i]
	}
	mean /= float64(len(g))
	var ss float64
	for _, i := range g {
		ss += (x[i] - mean) * (x[i] - mean)
	}
	return mean, math.Sqrt(ss / float64(len(g)-1))
}

// RLOO is the leave-one-out baseline: A_i = s_i − mean of the other samples
// of the group = n/(n−1)·(s_i − mean); a group of one keeps its raw score.
// No normalisation; returns equal advantages. Reads Rewards, AdvantageMask,
// Group.
func RLOO(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards, FieldGroup); err != nil {
		return err
	}
	b.outputs()
	sc, of, gs, err := trajScores(b)
	if err != nil {
		return err
	}
	adv := make([]float64, len(sc))
	for _, g := range gs {
		n := float64(len(g))
		if len(g) == 1 {
			adv[g[0]] = sc[g[0]]
			continue
		}
		mean, _ := meanStd(sc, g)
		for _, i := range g {
			adv[i] = n / (n - 1) * (sc[i] - mean)
		}
	}
	b.broadcast(perSeq(adv, of))
	return nil
}

// ReinforcePlusPlus is REINFORCE++: the discounted return G_t = r_t + γ·G_next
// over masked tokens only, so a final outcome flows back across tool
// responses to earlier turns, one γ per model token (Agent-R1's compressed
// form; verl instead resets the return at unmasked tokens). Returns are G;
// advantages are G whitened over the mask. Reads Rewards, AdvantageMask.
func ReinforcePlusPlus(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards); err != nil {
		return err
	}
	if err := checkGamma(cfg); err != nil {
		return err
	}
	b.outputs()
	m, r, A, R := b.AdvantageMask, b.Rewards, b.Advantages, b.Returns
	var sum, bad float64
	n := 0
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		g := 0.0
		for t := e - 1; t >= s; t-- {
			if !m[t] {
				A[t], R[t] = 0, 0
				continue
			}
			bad += r[t] - r[t]
			g = r[t] + cfg.Gamma*g
			A[t], R[t] = g, g
			sum += g
			n++
		}
	}
	if bad != 0 {
		return b.firstNonFiniteUnder(m, FieldRewards)
	}
	return whitenWith(A, m, sum, n, "REINFORCE++ returns")
}

// ReinforcePlusPlusBaseline subtracts the group mean score (0 for a group of
// one) from each s_i, broadcasts it over the masked tokens and whitens over
// the whole batch's masked tokens (token-weighted). Returns equal advantages.
// Reads Rewards, AdvantageMask, Group.
func ReinforcePlusPlusBaseline(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards, FieldGroup); err != nil {
		return err
	}
	b.outputs()
	sc, of, gs, err := trajScores(b)
	if err != nil {
		return err
	}
	adv := make([]float64, len(sc))
	for _, g := range gs {
		mean := 0.0
		if len(g) > 1 {
			mean, _ = meanStd(sc, g)
		}
		for _, i := range g {
			adv[i] = sc[i] - mean
		}
	}
	sum, n := b.broadcast(perSeq(adv, of))
	if err := whitenWith(b.Advantages, b.AdvantageMask, sum, n, "REINFORCE++-baseline advantages"); err != nil {
		return err
	}
	copy(b.Returns, b.Advantages)
	return nil
}

// ReMax uses the greedy response's reward as the baseline: returns are the
// undiscounted reward-to-go over masked tokens, advantages are the returns
// minus BaselineScore[i]. Reads Rewards, AdvantageMask, BaselineScore.
func ReMax(b *Batch, cfg *AdvantageConfig) error {
	if err := b.require(FieldAdvantageMask, FieldRewards); err != nil {
		return err
	}
	if err := b.Validate(FieldBaselineScore); err != nil {
		return err
	}
	b.outputs()
	m, r, A, R := b.AdvantageMask, b.Rewards, b.Advantages, b.Returns
	var bad float64
	for i := 0; i < b.NumSeqs(); i++ {
		s, e := b.Seq(i)
		g := 0.0
		for t := e - 1; t >= s; t-- {
			if !m[t] {
				A[t], R[t] = 0, 0
				continue
			}
			bad += r[t] - r[t]
			g += r[t]
			A[t], R[t] = g-b.BaselineScore[i], g
		}
	}
	if bad != 0 {
		return b.firstNonFiniteUnder(m, FieldRewards)
	}
	return nil
}

func checkGamma(cfg *AdvantageConfig) error {
	if cfg.Gamma < 0 || cfg.Gamma > 1 || cfg.Lambda < 0 || cfg.Lambda > 1 {
		return fmt.Errorf("rl: gamma %v and lambda %v must lie in [0, 1]", cfg.Gamma, cfg.Lambda)
	}
	return nil
}
