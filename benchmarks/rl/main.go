// Command rl benchmarks the host-side RL loss head of package rl: loss plus
// per-token gradients over a packed batch (default 256 sequences × 4096
// tokens, about a million tokens), and the advantage estimators over the same
// batch. Each figure is divided by a memory-bandwidth probe measured in the
// same run over the same input slices: one parallel read-only pass that sums
// every input the computation reads (same threads, same slices). A ratio of
// 1 means "as fast as reading the inputs once".
//
// The gorgonia autodiff twin of the PPO loss is timed on the same batch, as
// a peer-style comparison for the hand-written kernel. The machine's vector
// read bandwidth (package probe) gives a second ceiling: the time one pass
// over each computation's inputs would take at that speed.
//
// With -threads 1 the computations run on the calling goroutine, locked to
// its OS thread, and the command also reports thread CPU time
// (CLOCK_THREAD_CPUTIME_ID) for both the computation and its probe: on a
// machine shared with other jobs, preemption inflates wall-clock time at
// random, while CPU time only counts the cycles the work itself used.
//
// Usage:
//
//	go run ./benchmarks/rl [-seqs 256] [-len 4096] [-reps 7] [-threads 0] [-autodiff=true]
//	go run ./benchmarks/rl -step -seqs 64 -len 700 -reps 3   # the loss's share of a step's update
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/rl"
)

func main() {
	seqs := flag.Int("seqs", 256, "sequences in the batch")
	length := flag.Int("len", 4096, "tokens per sequence")
	reps := flag.Int("reps", 7, "repetitions; the minimum time is reported")
	threads := flag.Int("threads", 0, "GOMAXPROCS (0 = leave as is)")
	autodiff := flag.Bool("autodiff", true, "also time the gorgonia autodiff twin of the PPO loss")
	step := flag.Bool("step", false, "time the loss head against a whole RL step's actor update (-seqs 64 -len 700 fit the default run)")
	device := devsel.Flag(flag.CommandLine)
	flag.Parse()
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	if runtime.GOMAXPROCS(0) == 1 {
		runtime.LockOSThread()
	}
	if *step {
		if err := stepShare(*device, *seqs, *length, *reps); err != nil {
			fmt.Fprintln(os.Stderr, "step:", err)
			os.Exit(1)
		}
		return
	}
	b := makeBatch(*seqs, *length)
	fmt.Printf("batch: %d sequences × %d tokens = %d tokens, %.1f%% action tokens; GOMAXPROCS %d, %s/%s, NumCPU %d\n",
		*seqs, *length, b.NumTokens(), 100*actionFraction(b), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())

	if *autodiff {
		rl.RegisterLoss("autodiff-vanilla", rl.AutodiffLoss(ppoGraph))
	}
	var rows []row
	for _, c := range cases(b, *autodiff) {
		r, err := measure(c, b, *reps)
		if err != nil {
			fmt.Fprintln(os.Stderr, c.name+":", err)
			os.Exit(1)
		}
		fmt.Println(r)
		rows = append(rows, r)
	}
	// The machine's vector read bandwidth (package probe's AVX loop over a
	// 256 MiB buffer) as a second ceiling: the time one pass over the inputs
	// would take at that speed.
	peak := probe.ReadBandwidth(256<<20, runtime.GOMAXPROCS(0))
	fmt.Printf("\nvector read bandwidth (probe.ReadBandwidth, 256 MiB, %d threads): %.1f GB/s\n", runtime.GOMAXPROCS(0), peak)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "\ncomputation\tms\tinput MB\tprobe ms\tprobe GB/s\t× probe\t× vector read\tCPU ms\tprobe CPU ms\t× probe (CPU)\t")
	for _, r := range rows {
		ideal := r.mb / peak // ms: MB / (GB/s)
		fmt.Fprintf(w, "%s\t%.2f\t%.1f\t%.2f\t%.1f\t%.2f\t%.2f\t", r.name, r.ms, r.mb, r.probeMS, r.mb/r.probeMS, r.ms/r.probeMS, r.ms/ideal)
		if r.cpuMS > 0 {
			fmt.Fprintf(w, "%.2f\t%.2f\t%.2f\t\n", r.cpuMS, r.probeCPUMS, r.cpuMS/r.probeCPUMS)
		} else {
			fmt.Fprintf(w, "-\t-\t-\t\n")
		}
	}
	w.Flush()
}

// caseDef is one timed computation and the inputs it reads.
type caseDef struct {
	name   string
	floats func(b *rl.Batch) [][]float64 // per-token float inputs
	masks  func(b *rl.Batch) [][]bool
	run    func(b *rl.Batch) error
	// otherThreads marks computations that run work on threads of their
	// own (gorgonia's VM), whose CPU time the calling thread does not see.
	otherThreads bool
}

func cases(b *rl.Batch, autodiff bool) []caseDef {
	actor := func(mutate func(*rl.LossConfig)) func(*rl.Batch) error {
		cfg := rl.DefaultLossConfig()
		mutate(&cfg)
		norm, err := rl.NewNorm(cfg.AggMode, b, 0)
		if err != nil {
			panic(err)
		}
		out := &rl.Output{}
		return func(b *rl.Batch) error { return rl.ActorLoss(b, &cfg, norm, out) }
	}
	noEntropy := func(f func(*rl.Batch) error) func(*rl.Batch) error {
		return func(b *rl.Batch) error {
			ent := b.Entropy
			b.Entropy = nil
			defer func() { b.Entropy = ent }()
			return f(b)
		}
	}
	action := func(b *rl.Batch) [][]bool { return [][]bool{b.ActionMask} }
	advMask := func(b *rl.Batch) [][]bool { return [][]bool{b.AdvantageMask} }
	ppoIn := func(b *rl.Batch) [][]float64 { return [][]float64{b.LogProb, b.OldLogProb, b.Advantages} }
	cs := []caseDef{
		{name: "PPO loss+grad (vanilla, token-mean)", floats: ppoIn, masks: action,
			run: noEntropy(actor(func(c *rl.LossConfig) {}))},
		{name: "PPO + entropy + k3 KL loss (GRPO actor)", floats: func(b *rl.Batch) [][]float64 {
			return [][]float64{b.LogProb, b.OldLogProb, b.Advantages, b.RefLogProb, b.Entropy}
		}, masks: action, run: actor(func(c *rl.LossConfig) { c.EntropyCoeff, c.UseKLLoss = 0.001, true })},
		{name: "PPO, 64 micro-batches of 4 sequences", floats: ppoIn, masks: action,
			run: noEntropy(microBatches(b, 4))},
		{name: "GSPO loss+grad (seq-mean-token-mean)", floats: ppoIn, masks: action,
			run: noEntropy(actor(func(c *rl.LossConfig) {
				c.PolicyLoss, c.AggMode, c.ClipRatioLow, c.ClipRatioHigh = "gspo", rl.SeqMeanTokenMean, 3e-4, 4e-4
			}))},
		{name: "critic value loss+grad", floats: func(b *rl.Batch) [][]float64 { return [][]float64{b.Values, b.OldValues, b.Returns} }, masks: action,
			run: func() func(*rl.Batch) error {
				cfg := rl.DefaultLossConfig()
				norm, _ := rl.NewNorm(cfg.AggMode, b, 0)
				out := &rl.Output{}
				return func(b *rl.Batch) error { return rl.CriticLoss(b, 0.5, norm, out) }
			}()},
		{name: "GAE (γ=1, λ=1) + whitening", floats: func(b *rl.Batch) [][]float64 { return [][]float64{b.Rewards, b.OldValues} }, masks: advMask,
			run: estimator("gae")},
		{name: "GRPO advantages", floats: func(b *rl.Batch) [][]float64 { return [][]float64{b.Rewards} }, masks: advMask,
			run: estimator("grpo")},
	}
	if autodiff {
		cs = append(cs, caseDef{name: "gorgonia autodiff PPO loss+grad", otherThreads: true, floats: ppoIn, masks: action,
			run: noEntropy(actor(func(c *rl.LossConfig) { c.PolicyLoss = "autodiff-vanilla" }))})
	}
	return cs
}

// microBatches times the PPO loss computed micro-batch by micro-batch (`per`
// sequences each, the mini-batch's Norm), the trainer's gradient-accumulation
// pattern: the same tokens as the one-call case plus the per-call overhead.
func microBatches(b *rl.Batch, per int) func(*rl.Batch) error {
	cfg := rl.DefaultLossConfig()
	norm, err := rl.NewNorm(cfg.AggMode, b, 0)
	if err != nil {
		panic(err)
	}
	out := &rl.Output{}
	return func(b *rl.Batch) error {
		for i := 0; i < b.NumSeqs(); i += per {
			if err := rl.ActorLoss(b.Slice(i, min(i+per, b.NumSeqs())), &cfg, norm, out); err != nil {
				return err
			}
		}
		return nil
	}
}

// estimator times an estimator on a copy of the batch's output slices, so
// the loss cases keep their advantages.
func estimator(name string) func(*rl.Batch) error {
	cfg := rl.DefaultAdvantageConfig()
	cfg.Estimator = name
	return func(b *rl.Batch) error {
		adv, ret := b.Advantages, b.Returns
		defer func() { b.Advantages, b.Returns = adv, ret }()
		b.Advantages, b.Returns = scratchAdv, scratchRet
		err := rl.Estimate(b, &cfg)
		scratchAdv, scratchRet = b.Advantages, b.Returns
		return err
	}
}

var scratchAdv, scratchRet []float64

type row struct {
	name              string
	ms, mb, probeMS   float64
	cpuMS, probeCPUMS float64 // thread CPU time, with one thread only
}

func (r row) String() string {
	s := fmt.Sprintf("%-42s %8.2f ms   probe %6.2f ms over %6.1f MB   %.2f× probe", r.name, r.ms, r.probeMS, r.mb, r.ms/r.probeMS)
	if r.cpuMS > 0 {
		s += fmt.Sprintf("   CPU %.2f× probe", r.cpuMS/r.probeCPUMS)
	}
	return s
}

// measure times c and its probe alternately, reps times each, and keeps the
// minimum of each, so both see the same machine state.
func measure(c caseDef, b *rl.Batch, reps int) (row, error) {
	floats, masks := c.floats(b), c.masks(b)
	var bytes int
	for _, f := range floats {
		bytes += 8 * len(f)
	}
	for _, m := range masks {
		bytes += len(m)
	}
	if err := c.run(b); err != nil { // warm-up: allocations, graph build
		return row{}, err
	}
	best, bestProbe := math.Inf(1), math.Inf(1)
	bestCPU, bestProbeCPU := math.Inf(1), math.Inf(1)
	_, haveCPU := threadCPU()
	haveCPU = haveCPU && runtime.GOMAXPROCS(0) == 1 && !c.otherThreads
	for range reps {
		c0, _ := threadCPU()
		t0 := time.Now()
		probeSink += inputPass(floats, masks)
		bestProbe = min(bestProbe, time.Since(t0).Seconds())
		c1, _ := threadCPU()
		bestProbeCPU = min(bestProbeCPU, (c1 - c0).Seconds())
		t0 = time.Now()
		if err := c.run(b); err != nil {
			return row{}, err
		}
		best = min(best, time.Since(t0).Seconds())
		c2, _ := threadCPU()
		bestCPU = min(bestCPU, (c2 - c1).Seconds())
	}
	r := row{name: c.name, ms: best * 1e3, mb: float64(bytes) / 1e6, probeMS: bestProbe * 1e3}
	if haveCPU {
		r.cpuMS, r.probeCPUMS = bestCPU*1e3, bestProbeCPU*1e3
	}
	return r, nil
}

// probeSink is written and never read: it keeps the compiler from dropping
// the pass whose result it holds.
//
//lint:ignore U1000 written so that the measured pass is not optimised away
var probeSink float64

// inputPass reads every input once in parallel: GOMAXPROCS goroutines, each
// summing a contiguous token range of every slice.
func inputPass(floats [][]float64, masks [][]bool) float64 {
	n := 0
	if len(floats) > 0 {
		n = len(floats[0])
	} else if len(masks) > 0 {
		n = len(masks[0])
	}
	workers := runtime.GOMAXPROCS(0)
	if workers == 1 {
		return probeRange(floats, masks, 0, n) // on this thread, like the kernels
	}
	sums := make([]float64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { sums[w] = probeRange(floats, masks, lo, hi) })
	}
	wg.Wait()
	var s float64
	for _, v := range sums {
		s += v
	}
	return s
}

// probeRange sums tokens [lo, hi) of every input.
func probeRange(floats [][]float64, masks [][]bool, lo, hi int) float64 {
	var s float64
	for _, f := range floats {
		s += sum8(f[lo:hi])
	}
	var k int
	for _, m := range masks {
		k += count8(m[lo:hi])
	}
	return s + float64(k)
}

// sum8 sums with eight independent accumulators so the probe is bound by
// memory, not by the latency of an add chain.
func sum8(x []float64) float64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		y := x[i : i+8 : i+8]
		a0 += y[0]
		a1 += y[1]
		a2 += y[2]
		a3 += y[3]
		a4 += y[4]
		a5 += y[5]
		a6 += y[6]
		a7 += y[7]
	}
	for ; i < len(x); i++ {
		a0 += x[i]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// count8 counts true entries eight at a time without branches.
func count8(m []bool) int {
	var c0, c1, c2, c3 int
	i := 0
	for ; i+8 <= len(m); i += 8 {
		y := m[i : i+8 : i+8]
		c0 += b2i(y[0]) + b2i(y[4])
		c1 += b2i(y[1]) + b2i(y[5])
		c2 += b2i(y[2]) + b2i(y[6])
		c3 += b2i(y[3]) + b2i(y[7])
	}
	for ; i < len(m); i++ {
		c0 += b2i(m[i])
	}
	return c0 + c1 + c2 + c3
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// makeBatch builds S sequences of T tokens: a 256-token prompt, then model
// turns of about 400 tokens separated by tool responses of about 100 tokens,
// with random log-probs near each other (PPO's regime), rewards on the last
// action token and GAE advantages.
func makeBatch(S, T int) *rl.Batch {
	rng := rand.New(rand.NewPCG(1, 2))
	N := S * T
	b := &rl.Batch{Offsets: make([]int, S+1), PromptLen: make([]int, S), Group: make([]int, S), ActionMask: make([]bool, N)}
	for i := range S {
		b.Offsets[i+1] = (i + 1) * T
		b.Group[i] = i / 8
		p := min(256, T/4)
		b.PromptLen[i] = p
		t, model := p, true
		for t < T {
			n := 50 + rng.IntN(700)
			if !model {
				n = 20 + rng.IntN(160)
			}
			for k := t; k < min(t+n, T); k++ {
				b.ActionMask[i*T+k] = model
			}
			t += n
			model = !model
		}
	}
	b.AdvantageMask = b.ActionMask
	fill := func(f func(t int) float64) []float64 {
		x := make([]float64, N)
		for t := range x {
			x[t] = f(t)
		}
		return x
	}
	b.OldLogProb = fill(func(int) float64 { return -math.Abs(rng.NormFloat64()) * 2 })
	b.LogProb = fill(func(t int) float64 { return b.OldLogProb[t] + 0.1*rng.NormFloat64() })
	b.RefLogProb = fill(func(t int) float64 { return b.OldLogProb[t] + 0.1*rng.NormFloat64() })
	b.Entropy = fill(func(int) float64 { return 3 * rng.Float64() })
	b.OldValues = fill(func(int) float64 { return rng.NormFloat64() })
	b.Values = fill(func(t int) float64 { return b.OldValues[t] + 0.3*rng.NormFloat64() })
	scores := make([]float64, S)
	for i := range scores {
		scores[i] = float64(rng.IntN(3)) - 1
	}
	if err := rl.AddOutcome(b, scores); err != nil {
		panic(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		panic(err)
	}
	cfg := rl.DefaultAdvantageConfig()
	if err := rl.Estimate(b, &cfg); err != nil {
		panic(err)
	}
	return b
}

func actionFraction(b *rl.Batch) float64 {
	n := 0
	for _, m := range b.ActionMask {
		if m {
			n++
		}
	}
	return float64(n) / float64(len(b.ActionMask))
}
