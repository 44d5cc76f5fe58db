package rl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/rl"
)

// A fork's path: each of the four things a fork changes is one file with
// one registration, made here from outside the package, and each runs.

// 1. A loss: plain REINFORCE, ℓ = −A·log π, gradient −A·w per token.
// Like every loss it checks what it reads: a fork's entry runs under the
// package's fuzzers too.
func reinforce(b *rl.Batch, cfg *rl.LossConfig, w rl.Weights, out *rl.Output) error {
	if err := b.Validate(rl.FieldActionMask, rl.FieldLogProb, rl.FieldAdvantages); err != nil {
		return err
	}
	if len(w) != b.NumSeqs() {
		return fmt.Errorf("reinforce: %d weights for %d sequences", len(w), b.NumSeqs())
	}
	g, add := out.Grad(rl.GradLogProb)
	for i := range b.NumSeqs() {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			d := 0.0
			if b.ActionMask[t] {
				out.Loss += w[i] * -b.Advantages[t] * b.LogProb[t]
				d = -b.Advantages[t] * w[i]
			}
			if add {
				g[t] += d
			} else {
				g[t] = d
			}
		}
	}
	out.Metrics["actor/pg_loss"] = out.Loss
	return nil
}

// 2. An estimator: every action token of a sequence gets the sequence's
// summed reward minus the batch's mean.
func minusMean(b *rl.Batch, cfg *rl.AdvantageConfig) error {
	if err := b.Validate(rl.FieldRewards, rl.FieldAdvantageMask); err != nil {
		return err
	}
	n, S := b.NumTokens(), b.NumSeqs()
	b.Advantages, b.Returns = make([]float64, n), make([]float64, n)
	sums := make([]float64, S)
	var mean float64
	for i := range S {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			sums[i] += b.Rewards[t]
		}
		mean += sums[i] / float64(S)
	}
	for i := range S {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			if b.AdvantageMask[t] {
				b.Advantages[t], b.Returns[t] = sums[i]-mean, sums[i]
			}
		}
	}
	return nil
}

// 3. A tool: shout[text] answers the text in capitals.
type shout struct{}

func (shout) Name() string        { return "shout" }
func (shout) Description() string { return "Repeat a text in capitals." }
func (shout) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"text": {"type": "string", "description": "what to shout"}}, "required": ["text"]}`)
}
func (shout) Call(ctx context.Context, args json.RawMessage) (env.Result, error) {
	var a struct{ Text string }
	if err := json.Unmarshal(args, &a); err != nil {
		return env.Result{}, err
	}
	return env.Result{Content: strings.ToUpper(a.Text), Success: true}, nil
}

// 4. A reward: 1 when the transcript names a gold answer anywhere.
func mentions(t env.Transcript, golds []string) float64 {
	for _, g := range golds {
		if strings.Contains(t.Text, g) {
			return 1
		}
	}
	return 0
}

func init() {
	rl.RegisterLoss("reinforce", reinforce)
	rl.RegisterEstimator("minus-mean", minusMean, rl.Needs{})
	env.RegisterTool("shout", func(env.ToolDeps) (env.Tool, error) { return shout{}, nil })
	env.RegisterReward("mentions", mentions)
}

func Example_forkPath() {
	// The config names each by its key: actor.policy_loss=reinforce,
	// algorithm.adv_estimator=minus-mean, env.tools=[shout], env.reward=mentions.
	b := &rl.Batch{
		Offsets:       []int{0, 3, 6},
		ActionMask:    []bool{false, true, true, false, true, true},
		AdvantageMask: []bool{false, true, true, false, true, true},
		Rewards:       []float64{0, 0, 1, 0, 0, 0},
		LogProb:       []float64{0, -0.5, -1, 0, -2, -0.25},
	}
	adv := rl.AdvantageConfig{Estimator: "minus-mean"}
	if err := rl.Estimate(b, &adv); err != nil {
		panic(err)
	}
	fmt.Println("advantages", b.Advantages)

	cfg := rl.DefaultLossConfig()
	cfg.PolicyLoss = "reinforce"
	norm, err := rl.NewNorm(cfg.AggMode, b, 0)
	if err != nil {
		panic(err)
	}
	var out rl.Output
	if err := rl.ActorLoss(b, &cfg, norm, &out); err != nil {
		panic(err)
	}
	// token-mean over 4 tokens: −(0.5·−0.5 + 0.5·−1 − 0.5·−2 − 0.5·−0.25)/4
	fmt.Printf("loss %.5f, dlogprob %v\n", out.Loss, out.DLogProb)

	tools, err := env.NewTools([]string{"shout", "lookup"}, env.ToolDeps{})
	if err != nil {
		panic(err)
	}
	res, err := tools[0].Call(context.Background(), json.RawMessage(`{"text": "found it"}`))
	fmt.Println(res.Content, err)

	sc, err := env.NewScorer("mentions", env.QwenMarkup())
	if err != nil {
		panic(err)
	}
	s := sc.Score(data.Sample{Answers: []string{"Paris"}}, "<|im_start|>assistant\nIt is Paris.<|im_end|>")
	fmt.Println("reward", s.Score)

	// Output:
	// advantages [0 0.5 0.5 0 -0.5 -0.5]
	// loss -0.09375, dlogprob [0 -0.125 -0.125 0 0.125 0.125]
	// FOUND IT <nil>
	// reward 1
}
