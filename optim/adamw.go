package optim

import (
	"fmt"
	"math"
	"strconv"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/safetensors"
)

// Config holds AdamW's hyperparameters and its schedule; the defaults are
// verl's actor defaults (reference/agent-r1.md §1.8).
type Config struct {
	LR          float64 `yaml:"lr" help:"peak learning rate"`
	Beta1       float64 `yaml:"beta1" help:"AdamW first-moment decay"`
	Beta2       float64 `yaml:"beta2" help:"AdamW second-moment decay"`
	Eps         float64 `yaml:"eps" help:"AdamW epsilon"`
	WeightDecay float64 `yaml:"weight_decay" help:"decoupled weight decay"`
	GradClip    float64 `yaml:"grad_clip" help:"clip the global gradient norm to this (0: off)"`
	WarmupSteps int     `yaml:"warmup_steps" help:"linear warm-up steps from 0 to lr"`
	Schedule    string  `yaml:"schedule" help:"after warm-up: constant or cosine"`
	MinLRRatio  float64 `yaml:"min_lr_ratio" help:"cosine floor as a fraction of lr"`
	// StateDType stores both moments as bfloat16 (stochastic rounding),
	// halving the optimizer's memory; float32 (the default) is exact.
	StateDType string `yaml:"state_dtype" help:"AdamW moments as float32 or bfloat16 (stochastic rounding, half the memory)"`
}

// DefaultConfig returns verl's actor optimizer defaults.
func DefaultConfig() Config {
	return Config{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradClip: 1.0, Schedule: "constant"}
}

// Validate reports a hyperparameter outside its range.
func (c *Config) Validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: lr %v must be a finite number ≥ 0", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("optim: betas (%v, %v) must lie in [0, 1)", c.Beta1, c.Beta2)
	case !(c.Eps > 0):
		return fmt.Errorf("optim: eps %v must be > 0", c.Eps)
	case !(c.WeightDecay >= 0), !(c.GradClip >= 0), c.WarmupSteps < 0:
		return fmt.Errorf("optim: weight_decay %v, grad_clip %v and warmup_steps %d must be ≥ 0", c.WeightDecay, c.GradClip, c.WarmupSteps)
	case c.Schedule != "constant" && c.Schedule != "cosine":
		return fmt.Errorf("optim: schedule %q is neither constant nor cosine", c.Schedule)
	case !(c.MinLRRatio >= 0 && c.MinLRRatio <= 1):
		return fmt.Errorf("optim: min_lr_ratio %v must lie in [0, 1]", c.MinLRRatio)
	case c.StateDType != "" && c.StateDType != "float32" && c.StateDType != "bfloat16":
		return fmt.Errorf("optim: state_dtype %q is neither float32 nor bfloat16", c.StateDType)
	}
	return nil
}

// LRAt is the learning rate of 0-based step s of total: linear warm-up to LR
// over WarmupSteps (step 0 gets LR/WarmupSteps), then constant, or cosine
// decay from LR to LR·MinLRRatio at the last step.
func (c *Config) LRAt(s, total int) float64 {
	if s < c.WarmupSteps {
		return c.LR * float64(s+1) / float64(c.WarmupSteps)
	}
	if c.Schedule != "cosine" || total <= c.WarmupSteps+1 {
		return c.LR
	}
	p := float64(s-c.WarmupSteps) / float64(total-c.WarmupSteps-1)
	p = min(max(p, 0), 1)
	floor := c.LR * c.MinLRRatio
	return floor + (c.LR-floor)*0.5*(1+math.Cos(math.Pi*p))
}

// AdamW updates a parameter arena from its gradient arena.
type AdamW struct {
	Config
	TotalSteps int // for the cosine schedule

	dev           model.Device
	params, grads model.Buffer
	// spans are the runs of params (and grads) this optimizer updates,
	// packed back to back in m and v: the whole arena, or a ZeRO-1 rank's
	// shard.
	spans []Span
	// packed: grads holds just the spans' gradients, back to back like the
	// moments (a ZeRO-2 rank's gradient shard), not the arena's layout.
	packed bool
	m, v   model.Buffer // first and second moments of the spans
	step   int          // updates done so far
	// offloaded: m and v live in file mappings (Offload), resident
	// during a step only.
	offloaded bool
}

// New returns an optimizer for params (updated in place) reading grads.
func New(dev model.Device, params, grads model.Buffer, cfg Config, totalSteps int) (*AdamW, error) {
	if params.Len() != grads.Len() {
		return nil, fmt.Errorf("optim: %d parameters but %d gradients", params.Len(), grads.Len())
	}
	return NewShard(dev, params, grads, []Span{{0, params.Len()}}, cfg, totalSteps)
}

// alloc returns a moment buffer of n values in the state dtype.
func (o *AdamW) alloc(n int) (model.Buffer, error) {
	if o.StateDType != "bfloat16" {
		return o.dev.Alloc(n), nil
	}
	b, ok := model.AllocAs(o.dev, n, model.StoreBF16)
	if !ok {
		return nil, fmt.Errorf("optim: state_dtype bfloat16: device %s has no bfloat16 storage", o.dev.Name())
	}
	return b, nil
}

// Steps is the number of updates done.
func (o *AdamW) Steps() int { return o.step }

// StepResult reports one update.
type StepResult struct {
	GradNorm float64 // global L2 norm of the gradients, after scale, before clipping
	LR       float64
	Skipped  bool // the gradient norm was NaN or Inf: no update was made
}

// Step applies one update. scale multiplies every gradient first (e.g.
// 1/accumulation steps when the loss code did not already normalise); the
// global norm is then clipped to GradClip. A non-finite norm skips the
// update and leaves weights and moments untouched, as verl does.
func (o *AdamW) Step(scale float64) StepResult {
	return o.StepNorm(scale, math.Sqrt(o.GradSumSquares())*math.Abs(scale))
}

// GradSumSquares is Σ g² over the gradients this optimizer reads (a
// shard's part of the global norm).
func (o *AdamW) GradSumSquares() float64 {
	if o.whole() {
		return o.dev.SumSquares(o.grads)
	}
	s, k := 0.0, 0
	for _, sp := range o.spans { // span by span, packed or not: the same sum
		off := sp.Off
		if o.packed {
			off = k
		}
		s += o.dev.SumSquares(o.grads.Slice(off, sp.N))
		k += sp.N
	}
	return s
}

// StepNorm is Step with the global gradient norm (after scale) given: a
// ZeRO-1 rank holds only its shard of the gradients, and the norm is the
// root of the ranks' summed GradSumSquares.
func (o *AdamW) StepNorm(scale, norm float64) StepResult {
	r := StepResult{GradNorm: norm, LR: o.LRAt(o.step, o.TotalSteps)}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		r.Skipped = true
		return r
	}
	if o.GradClip > 0 && norm > o.GradClip {
		scale *= o.GradClip / norm
	}
	o.step++
	hp := model.AdamWParams{LR: float32(r.LR), Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: float32(o.Eps),
		WeightDecay: float32(o.WeightDecay), Step: o.step, GradScale: float32(scale)}
	defer o.dropState()
	if o.whole() { // one fused call over the arena, the buffers as given
		o.dev.AdamW(o.params, o.grads, o.m, o.v, hp)
		return r
	}
	k := 0
	for _, s := range o.spans {
		g := k // the packed shard's offset
		if !o.packed {
			g = s.Off
		}
		o.dev.AdamW(o.params.Slice(s.Off, s.N), o.grads.Slice(g, s.N), o.m.Slice(k, s.N), o.v.Slice(k, s.N), hp)
		k += s.N
	}
	return r
}

// Offload moves the moments into file mappings in dir (a directory on a
// disk; model.SpillBuffer), host memory on the CPU only: they are read and
// written during a step and leave the resident set after it, the page
// cache keeping them while memory allows and the disk when it does not.
// The values are the same; a step reads them back (from the page cache, or
// from the disk: 4 or 8 bytes a parameter). Offloading twice is a no-op.
func (o *AdamW) Offload(dir string) error {
	if o.offloaded {
		return nil
	}
	m, err := model.SpillBuffer(o.dev, o.m, dir)
	if err != nil {
		return fmt.Errorf("optim: offload the moments: %w", err)
	}
	v, err := model.SpillBuffer(o.dev, o.v, dir)
	if err != nil {
		return fmt.Errorf("optim: offload the moments: %w", err)
	}
	o.dev.Free(o.m)
	o.dev.Free(o.v)
	o.m, o.v, o.offloaded = m, v, true
	o.dropState()
	return nil
}

// Offloaded says whether Offload moved the moments into file mappings.
func (o *AdamW) Offloaded() bool { return o.offloaded }

// dropState releases offloaded moments' resident pages (their values stay
// in the file mapping).
func (o *AdamW) dropState() {
	if o.offloaded {
		model.DropPages(o.dev, o.m)
		model.DropPages(o.dev, o.v)
	}
}

// Save writes the moments and the step count to a safetensors file.
// Moments held in host memory are written in place, bfloat16 ones as BF16
// tensors; others go through one host copy.
func (o *AdamW) Save(path string) error {
	if !o.whole() {
		return fmt.Errorf("optim: %s: this optimizer holds a shard of %d of %d values; its file is written by SaveShards", path, o.m.Len(), o.params.Len())
	}
	n := o.m.Len()
	tensor := func(name string, b model.Buffer) safetensors.Tensor {
		if h, ok := model.HostBF16(o.dev, b); ok {
			return safetensors.Tensor{Name: name, DType: safetensors.BF16, Shape: []int{n}, Raw: bf16Bytes(h)}
		}
		host, ok := model.HostF32(o.dev, b)
		if !ok {
			host = make([]float32, n)
			o.dev.Download(host, b)
		}
		return safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{n}, F32: host}
	}
	return safetensors.WriteFile(path, []safetensors.Tensor{tensor("exp_avg", o.m), tensor("exp_avg_sq", o.v)},
		map[string]string{"step": strconv.Itoa(o.step), "format": "r1go-adamw"})
}

// Load restores what Save (or SaveShards) wrote; the file must match the
// parameter count. A shard keeps its spans of the file's moments.
func (o *AdamW) Load(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	step, err := strconv.Atoi(f.Metadata()["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("optim: %s: metadata step %q is not a step count", path, f.Metadata()["step"])
	}
	for _, t := range []struct {
		name string
		dst  model.Buffer
	}{{"exp_avg", o.m}, {"exp_avg_sq", o.v}} {
		info, ok := f.Info(t.name)
		if !ok {
			return fmt.Errorf("optim: %s: tensor %s is missing", path, t.name)
		}
		if int(info.NumElements()) != o.params.Len() {
			return fmt.Errorf("optim: %s: tensor %s has %d values, the model has %d parameters", path, t.name, info.NumElements(), o.params.Len())
		}
		if err := o.readSpans(f, t.name, t.dst); err != nil {
			return err
		}
	}
	o.step = step
	o.dropState()
	return nil
}
