package rl_test

import (
	"fmt"

	"gorgonia.org/gorgonia"

	"github.com/r1go/r1go/rl"
)

// logClip is the package documentation's worked example: PPO clipping the
// log-ratio to ±δ instead of the ratio, as a gorgonia expression.
func logClip(v *rl.Vars) (*gorgonia.Node, error) {
	const delta = 0.2
	logRatio, err := gorgonia.Sub(v.LogProb, v.OldLogProb)
	if err != nil {
		return nil, err
	}
	clipped := gorgonia.Must(gorgonia.MinBetween(
		gorgonia.Must(gorgonia.MaxBetween(logRatio, v.Full(-delta))), v.Full(delta)))
	negAdv := gorgonia.Must(gorgonia.Neg(v.Advantages))
	unclippedLoss := gorgonia.Must(gorgonia.HadamardProd(negAdv, gorgonia.Must(gorgonia.Exp(logRatio))))
	clippedLoss := gorgonia.Must(gorgonia.HadamardProd(negAdv, gorgonia.Must(gorgonia.Exp(clipped))))
	// Pessimistic bound as in PPO; the first operand wins ties, so the
	// gradient flows through the unclipped branch inside the range.
	loss := gorgonia.Must(gorgonia.MaxBetween(unclippedLoss, clippedLoss))
	v.Metric("actor/pg_clipfrac", gorgonia.Must(gorgonia.Gt(clippedLoss, unclippedLoss, true)))
	return loss, nil
}

func init() { rl.RegisterLoss("log-clip", rl.AutodiffLoss(logClip)) }

func Example_autodiffLoss() {
	// Two sequences: a one-token prompt, then three model tokens with a
	// one-token tool response in the middle of the second.
	b := &rl.Batch{
		Offsets:    []int{0, 4, 9},
		ActionMask: []bool{false, true, true, true, false, true, true, false, true},
		LogProb:    []float64{0, -1.0, -0.5, -2.0, 0, -0.1, -1.2, 0, -0.7},
		OldLogProb: []float64{0, -1.1, -0.9, -2.0, 0, -0.6, -1.0, 0, -0.7},
		Advantages: []float64{0, 1, 1, 1, 0, -1, -1, 0, -1},
	}
	cfg := rl.DefaultLossConfig()
	cfg.PolicyLoss = "log-clip"
	norm, err := rl.NewNorm(cfg.AggMode, b, 0)
	if err != nil {
		panic(err)
	}
	var out rl.Output
	if err := rl.ActorLoss(b, &cfg, norm, &out); err != nil {
		panic(err)
	}
	// By hand, token-mean over the 6 model tokens: log-ratios 0.1, 0.4, 0,
	// 0.5, −0.2, 0 with advantages +1, +1, +1, −1, −1, −1. The 0.4 token is
	// clipped (gradient 0); the others follow −A·e^d/6.
	fmt.Printf("loss %.4f, clipfrac %.3f\n", out.Loss, out.Metrics["actor/pg_clipfrac"])
	fmt.Printf("%.4f\n", out.DLogProb)

	// Output:
	// loss 0.0235, clipfrac 0.167
	// [0.0000 -0.1842 0.0000 -0.1667 0.0000 0.2748 0.1365 0.0000 0.1667]
}
