package main

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// Divergence guards. A step whose loss, gradient norm or weights are not
// finite has already destroyed the policy: saving it would replace the last
// good checkpoint with garbage, and every later step would only train on
// NaN. So such a step is never checkpointed and the run stops, naming the
// checkpoint to resume from. A collapsing entropy is not fatal, only
// suspicious (the policy has stopped exploring), so it is a warning.

// ErrDiverged marks the error of a run stopped by a non-finite step.
var ErrDiverged = errors.New("training diverged")

// divergedKeys are the step metrics that must be finite: the losses and
// the gradient norms (a NaN anywhere in the backward shows in the norm).
var divergedKeys = []string{"actor/pg_loss", "actor/kl_loss", "actor/entropy", "actor/grad_norm", "critic/vf_loss", "critic/grad_norm"}

// checkStep returns an error wrapping ErrDiverged when a loss or gradient
// norm of the step, or a weight of any of the models, is not finite. The
// error names what was found, the step, and the last good checkpoint.
// models may be nil: the weights are scanned only before a checkpoint (a
// non-finite update shows in the gradient norm or, a step later, in the
// loss, which are checked every step for free).
func checkStep(step int, m rl.Metrics, runDir string, models map[string]*model.Model) error {
	var what string
	for _, k := range divergedKeys {
		if v, ok := m[k]; ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			what = fmt.Sprintf("%s is %v", k, v)
			break
		}
	}
	if what == "" {
		names := make([]string, 0, len(models))
		for name := range models {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if msg := nonFiniteWeight(models[name]); msg != "" {
				what = name + " " + msg
				break
			}
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w at step %d: %s; the step was not checkpointed. %s", ErrDiverged, step, what, lastGood(runDir))
}

// scanChunk is how many weights nonFiniteWeight copies to the host at a
// time: 16 MB, so that a 7B policy on a GPU needs no 28 GB host copy.
const scanChunk = 1 << 22

// nonFiniteWeight names the first tensor of m holding NaN or Inf, with
// the count, or returns "".
func nonFiniteWeight(m *model.Model) string {
	host := make([]float32, min(scanChunk, m.NumParams()))
	off := 0
	for _, t := range m.Tensors() {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		bad, first := 0, -1
		var firstV float32
		for lo := 0; lo < n; lo += scanChunk {
			k := min(scanChunk, n-lo)
			m.Dev.Download(host[:k], model.ReadableWeights(m.Dev, m.Params.Slice(off+lo, k))) // the bf16 copy where dp.shard_masters gave the fp32 back
			for i, v := range host[:k] {
				if v-v != 0 { // NaN or ±Inf: x-x is 0 for every finite x
					if first < 0 {
						first, firstV = lo+i, v
					}
					bad++
				}
			}
		}
		if bad > 0 {
			return fmt.Sprintf("weight %s holds %d non-finite values (first at flat index %d: %v)", t.Name, bad, first, firstV)
		}
		off += n
	}
	return ""
}

// lastGood says where to resume from.
func lastGood(runDir string) string {
	steps, err := checkpointSteps(runDir)
	if err != nil || len(steps) == 0 {
		return "No RL checkpoint was saved yet; start again (trainer.overwrite=true) with a lower actor.optim.lr or a tighter clip ratio."
	}
	n := steps[len(steps)-1]
	return fmt.Sprintf("The last good checkpoint is %s: resume from it with trainer.resume=true, perhaps with a lower actor.optim.lr.",
		filepath.Join(runDir, fmt.Sprintf("global_step_%d", n)))
}

// entropyWatch warns when the policy's entropy stays below a threshold for
// a number of consecutive steps; it warns once per such stretch.
type entropyWatch struct {
	threshold float64
	steps     int
	below     int
}

// observe takes one step's entropy and returns a warning, or "".
func (w *entropyWatch) observe(step int, entropy float64) string {
	if w.steps <= 0 || math.IsNaN(entropy) {
		return ""
	}
	if entropy >= w.threshold {
		w.below = 0
		return ""
	}
	w.below++
	if w.below != w.steps {
		return ""
	}
	return fmt.Sprintf("warning: entropy collapse: the policy entropy has stayed below %g nats per token for %d steps (now %.4f at step %d); "+
		"the policy has stopped exploring and GRPO groups give no signal. Consider a higher rollout temperature, actor.entropy_coeff > 0, "+
		"or a lower learning rate", w.threshold, w.steps, entropy, step)
}

// stepEntropy is the step's policy entropy per action token: the actor's
// entropy metric where the loss computed it, otherwise the mean negative
// log-probability of the sampled action tokens, whose expectation is the
// entropy of the sampling distribution.
func stepEntropy(m rl.Metrics, trajs []*rl.Trajectory) float64 {
	if v, ok := m["actor/entropy"]; ok {
		return v
	}
	var sum float64
	n := 0
	for _, t := range trajs {
		for i, a := range t.Action {
			if a {
				sum -= float64(t.LogProb[i])
				n++
			}
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}
