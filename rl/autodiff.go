package rl

import (
	"fmt"
	"math"
	"sync"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Vars are the inputs of an autodiff loss: one float64 vector node of length
// N per per-token Batch field, the action mask as 0/1, and the loss config.
// Fields the loss does not use need not be set on the Batch. N is the token
// count rounded up to a bucket; padding tokens are masked out and zero.
type Vars struct {
	Graph  *gorgonia.ExprGraph
	N      int
	Config LossConfig

	LogProb, OldLogProb, RefLogProb *gorgonia.Node // [N]
	Advantages, Returns             *gorgonia.Node // [N]
	Entropy, Values, OldValues      *gorgonia.Node // [N]
	Mask                            *gorgonia.Node // [N] 1 on action tokens, else 0

	consts  map[float64]*gorgonia.Node
	metrics map[string]*gorgonia.Node
}

// Full returns a constant [N] vector filled with x. gorgonia's MinBetween and
// MaxBetween need operands of equal shape, so clamps compare against these.
func (v *Vars) Full(x float64) *gorgonia.Node {
	if n, ok := v.consts[x]; ok {
		return n
	}
	data := make([]float64, v.N)
	for i := range data {
		data[i] = x
	}
	n := v.Graph.Constant(tensor.New(tensor.WithShape(v.N), tensor.WithBacking(data)))
	v.consts[x] = n
	return n
}

// Metric reports the per-token vector x under name as its mean over the
// action tokens (e.g. a clip indicator built with gorgonia.Gt(..., true)).
func (v *Vars) Metric(name string, x *gorgonia.Node) { v.metrics[name] = x }

// AutodiffFunc builds a per-token loss ℓ as a [N] vector expression over v.
// The adapter aggregates it (Σ w·m·ℓ) and differentiates with respect to
// LogProb, Entropy and Values, whichever ℓ depends on.
type AutodiffFunc func(v *Vars) (*gorgonia.Node, error)

// AutodiffLoss turns f into a Loss that returns the same outputs as a
// hand-written one: loss, gradients, actor/pg_loss, actor/ppo_kl (when the
// loss reads both log-probs) and f's own metrics. The graph is built and
// compiled once per (bucketed) length and config, then cached; each call
// copies the masked inputs in (masked-out positions become 0, so a NaN there
// cannot leak through 0·NaN), runs the tape and copies the gradients out.
// NaN or Inf on an action token is an error naming field and position.
func AutodiffLoss(f AutodiffFunc) Loss {
	c := &adCache{build: f, graphs: map[adKey]*adGraph{}}
	return c.loss
}

// adBucket rounds token counts up so that micro-batches of similar size share
// a compiled graph.
const adBucket = 512

// adCacheSize bounds the compiled graphs kept per loss.
const adCacheSize = 16

type adKey struct {
	n   int
	cfg LossConfig
}

type adCache struct {
	build  AutodiffFunc
	mu     sync.Mutex
	graphs map[adKey]*adGraph
	order  []adKey
}

type adInput struct {
	field  Field // "" for the mask and the weight
	isMask bool
	node   *gorgonia.Node
	buf    []float64
}

type adGraph struct {
	mu      sync.Mutex
	vm      gorgonia.VM
	inputs  []adInput // used fields, plus mask and weight
	unused  []adInput // inputs the loss does not read, bound to zeros once
	mask    []float64
	weight  []float64
	cost    gorgonia.Value
	wrt     []GradField
	grads   []gorgonia.Value
	names   []string
	metrics []gorgonia.Value
	ratio   bool // the loss reads LogProb and OldLogProb: report actor/ppo_kl
}

func (c *adCache) get(n int, cfg *LossConfig) (*adGraph, error) {
	key := adKey{n, *cfg}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.graphs[key]; ok {
		return g, nil
	}
	g, err := buildAD(c.build, n, cfg)
	if err != nil {
		return nil, err
	}
	if len(c.order) == adCacheSize {
		delete(c.graphs, c.order[0])
		c.order = c.order[1:]
	}
	c.graphs[key] = g
	c.order = append(c.order, key)
	return g, nil
}

func buildAD(f AutodiffFunc, n int, cfg *LossConfig) (ag *adGraph, err error) {
	defer func() {
		// gorgonia.Must panics on a malformed expression; report it as an error.
		if r := recover(); r != nil {
			ag, err = nil, fmt.Errorf("rl: autodiff loss graph: %v", r)
		}
	}()
	g := gorgonia.NewGraph()
	vec := func(name string) *gorgonia.Node {
		return gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(n), gorgonia.WithName(name))
	}
	v := &Vars{Graph: g, N: n, Config: *cfg, consts: map[float64]*gorgonia.Node{}, metrics: map[string]*gorgonia.Node{}}
	fields := []struct {
		f    Field
		node **gorgonia.Node
	}{
		{FieldLogProb, &v.LogProb}, {FieldOldLogProb, &v.OldLogProb}, {FieldRefLogProb, &v.RefLogProb},
		{FieldAdvantages, &v.Advantages}, {FieldReturns, &v.Returns},
		{FieldEntropy, &v.Entropy}, {FieldValues, &v.Values}, {FieldOldValues, &v.OldValues},
	}
	for _, fd := range fields {
		*fd.node = vec(string(fd.f))
	}
	v.Mask = vec("Mask")
	loss, err := f(v)
	if err != nil {
		return nil, fmt.Errorf("rl: autodiff loss graph: %w", err)
	}
	if !loss.Shape().Eq(tensor.Shape{n}) {
		return nil, fmt.Errorf("rl: autodiff loss must be a per-token vector of shape (%d), got %v", n, loss.Shape())
	}
	weight := vec("weight")
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(loss, weight))))

	roots := gorgonia.Nodes{cost}
	ag = &adGraph{weight: make([]float64, n)}
	for _, name := range sortedKeys(v.metrics) {
		roots = append(roots, v.metrics[name])
		ag.names = append(ag.names, name)
	}
	used := map[*gorgonia.Node]bool{}
	for _, node := range g.ExactSubgraphRoots(roots...).AllNodes() {
		used[node] = true
	}
	var wrt gorgonia.Nodes
	zeros := make([]float64, n) // bound to the inputs the loss does not read
	for _, fd := range fields {
		node := *fd.node
		if !used[node] {
			ag.unused = append(ag.unused, adInput{node: node, buf: zeros})
			continue
		}
		ag.inputs = append(ag.inputs, adInput{field: fd.f, node: node, buf: make([]float64, n)})
		switch fd.f {
		case FieldLogProb:
			ag.wrt, wrt = append(ag.wrt, GradLogProb), append(wrt, node)
		case FieldEntropy:
			ag.wrt, wrt = append(ag.wrt, GradEntropy), append(wrt, node)
		case FieldValues:
			ag.wrt, wrt = append(ag.wrt, GradValue), append(wrt, node)
		}
	}
	if used[v.Mask] {
		ag.mask = make([]float64, n)
		ag.inputs = append(ag.inputs, adInput{node: v.Mask, buf: ag.mask, isMask: true})
	} else {
		ag.unused = append(ag.unused, adInput{node: v.Mask, buf: zeros})
	}
	ag.inputs = append(ag.inputs, adInput{node: weight, buf: ag.weight})
	ag.ratio = used[v.LogProb] && used[v.OldLogProb]
	if len(wrt) == 0 {
		return nil, fmt.Errorf("rl: autodiff loss depends on none of LogProb, Entropy, Values")
	}
	gradNodes, err := gorgonia.Grad(cost, wrt...)
	if err != nil {
		return nil, fmt.Errorf("rl: autodiff loss gradient: %w", err)
	}
	gorgonia.Read(cost, &ag.cost)
	ag.grads = make([]gorgonia.Value, len(gradNodes))
	for k, gn := range gradNodes {
		gorgonia.Read(gn, &ag.grads[k])
	}
	ag.metrics = make([]gorgonia.Value, len(ag.names))
	for k, name := range ag.names {
		gorgonia.Read(v.metrics[name], &ag.metrics[k])
	}
	for _, in := range ag.unused {
		if err := gorgonia.Let(in.node, tensor.New(tensor.WithShape(n), tensor.WithBacking(in.buf))); err != nil {
			return nil, fmt.Errorf("rl: autodiff loss input: %w", err)
		}
	}
	ag.vm = gorgonia.NewTapeMachine(g)
	return ag, nil
}

func (c *adCache) loss(b *Batch, cfg *LossConfig, w Weights, out *Output) error {
	if err := b.require(FieldActionMask); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	N := b.NumTokens()
	n := (N + adBucket - 1) / adBucket * adBucket
	if n == 0 {
		n = adBucket
	}
	ag, err := c.get(n, cfg)
	if err != nil {
		return err
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	m := b.ActionMask
	clear(ag.weight)
	for i := range w {
		s, e := b.Seq(i)
		for t := s; t < e; t++ {
			if m[t] {
				ag.weight[t] = w[i]
			}
		}
	}
	for _, in := range ag.inputs {
		switch {
		case in.field != "":
			x, _ := b.floats(in.field)
			if err := b.require(in.field); err != nil {
				return err
			}
			clear(in.buf)
			for t, v := range x {
				if m[t] {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						return b.badValue(string(in.field), t, v, false)
					}
					in.buf[t] = v
				}
			}
		case in.isMask:
			clear(in.buf)
			for t, v := range m {
				if v {
					in.buf[t] = 1
				}
			}
		}
		if err := gorgonia.Let(in.node, tensor.New(tensor.WithShape(n), tensor.WithBacking(in.buf))); err != nil {
			return fmt.Errorf("rl: autodiff loss input %s: %w", in.field, err)
		}
	}
	defer ag.vm.Reset()
	if err := ag.vm.RunAll(); err != nil {
		return fmt.Errorf("rl: autodiff loss run: %w", err)
	}
	loss := ag.cost.Data().(float64)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("rl: autodiff loss is %v with finite inputs", loss)
	}
	out.Loss += loss
	for k, f := range ag.wrt {
		src := ag.grads[k].Data().([]float64)
		g, add := out.Grad(f)
		for t := range g {
			if add {
				g[t] += src[t]
			} else {
				g[t] = src[t] + 0 // turns gorgonia's −0 on masked tokens into 0
			}
		}
	}
	out.Metrics["actor/pg_loss"] = loss
	if ag.ratio {
		var kl, cnt float64
		for t, v := range m {
			if v {
				kl -= b.LogProb[t] - b.OldLogProb[t]
				cnt++
			}
		}
		out.Metrics["actor/ppo_kl"] = kl / (cnt + maskEps)
	}
	for k, name := range ag.names {
		x := ag.metrics[k].Data().([]float64)
		mean, _, _, _ := MaskedStats(x[:N], m)
		out.Metrics[name] = mean
	}
	return nil
}
