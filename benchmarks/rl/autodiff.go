package main

import (
	G "gorgonia.org/gorgonia"

	"github.com/r1go/r1go/rl"
)

// ppoGraph is the PPO clipped surrogate with dual clip as a gorgonia
// expression, the same per-token formula as rl.PPOLoss.
func ppoGraph(v *rl.Vars) (*G.Node, error) {
	cfg := v.Config
	clamp := func(x *G.Node, lo, hi float64) *G.Node {
		return G.Must(G.MinBetween(G.Must(G.MaxBetween(x, v.Full(lo))), v.Full(hi)))
	}
	lowClip, highClip := cfg.ClipRatio, cfg.ClipRatio
	if cfg.ClipRatioLow != 0 {
		lowClip = cfg.ClipRatioLow
	}
	if cfg.ClipRatioHigh != 0 {
		highClip = cfg.ClipRatioHigh
	}
	ratio := G.Must(G.Exp(clamp(G.Must(G.Sub(v.LogProb, v.OldLogProb)), -20, 20)))
	negA := G.Must(G.Neg(v.Advantages))
	l1 := G.Must(G.HadamardProd(negA, ratio))
	l2 := G.Must(G.HadamardProd(negA, clamp(ratio, 1-lowClip, 1+highClip)))
	lc := G.Must(G.MaxBetween(l1, l2))
	dual := G.Must(G.MinBetween(lc, G.Must(G.HadamardProd(negA, v.Full(cfg.ClipRatioC)))))
	neg := G.Must(G.Lt(v.Advantages, v.Full(0), true))
	pos := G.Must(G.Sub(v.Full(1), neg))
	return G.Add(G.Must(G.HadamardProd(neg, dual)), G.Must(G.HadamardProd(pos, lc)))
}
