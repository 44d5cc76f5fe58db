package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/internal/pages"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/cpu/gemm"
	"github.com/r1go/r1go/optim"
)

// stepOptions are the step section's settings (flags -step_*).
type stepOptions struct {
	dir                string   // the random-weight Qwen2.5-0.5B-shaped bf16 folder
	prompts, n         int      // prompts × samples per prompt
	promptLen, respLen int      // tokens per prompt, per response
	microSeqs          int      // sequences per micro-batch of the update compared with PyTorch
	trainerMicro       int      // tokens per micro-batch of a second update row (0: skip it); scoring uses it too (0: 8,192)
	state              string   // AdamW moment dtype
	peer               bool     // run the PyTorch peer
	score              bool     // time the old and reference log-probs
	update             bool     // time the update (false: the rollout and scoring only, e.g. on another machine's cores)
	memLimitGiB        float64  // the collector's soft limit for r1go's step (0: none)
	spillRef           bool     // the reference's weights in a file mapping, resident only while scoring
	saveGiB            float64  // the policy's saved-layer bound (model.Model.SaveBytes; 0: the automatic 1 GiB)
	rolloutDTypes      []string // rollouts to time, in order: float32 (the policy), bfloat16 (its copy)
	streams            []string // R1GO_AMX_STREAM values whose bf16 decodes take turns after the rollout
	kvPages            bool     // bf16 decodes with the KV cache in huge and in small pages take turns after the rollout
	offloadOptim       bool     // AdamW's moments in file mappings, resident during its step only
}

// stepSection is one GRPO step of a Qwen2.5-0.5B-shaped model (random
// weights, the folder of benchmarks/cpu/memstep) with its phases timed
// apart, 8 prompts × 4 samples, 64-token prompts and 256-token responses:
//
//   - rollout: a prefill of every prompt, then one decode step per
//     response token for all 32 sequences at once, sampling at
//     temperature 1 on the host; decode tokens/s ÷ the batch's weight-read
//     bound (batch × read bandwidth ÷ the policy's float32 weight bytes,
//     which each step reads once; bandwidth from the same run's probe);
//   - old and reference log-probs (trainer's micro-batches, no gradient);
//   - the update: forward + backward of every micro-batch, then AdamW, on
//     the same micro-batches as PyTorch's forward+backward+AdamW of the
//     same shapes (train_step.py, mode "update"), which runs first, in a
//     child process, so that the two never share memory; a PyTorch user
//     must micro-batch too, since [32, 320, 151936] float32 logits take
//     6.2 GB; and, with -step_trainer_micro, once more at that
//     micro_batch_tokens (the trainer's default is 8,192);
//   - the peak RSS of the Go step (VmHWM, reset before it starts).
//
// The policy keeps float32 master weights, the reference is the frozen
// bf16 copy of the same folder, AdamW's moments are -step_state. With
// -step_spill_ref the reference's weights live in a file mapping
// (model.Model.SpillWeights) whose pages leave the resident set after
// scoring; the room goes to what the update saves for its backward
// (-step_save_gib: every layer of a 640-token micro-batch takes 1.1 GiB,
// its LM-head logits 0.36 GiB more).
func stepSection(e *env) []row {
	o := e.step
	var rows []row
	fail := func(what string, err error) []row {
		return append(rows, row{section: "step", name: what, note: err.Error()})
	}
	if err := ensureFolder(o.dir); err != nil {
		return fail("0.5B-shaped folder", err)
	}
	seqs, T := o.prompts*o.n, o.promptLen+o.respLen
	e.readBandwidth() // first while nothing else is in memory; again after each rollout

	// The PyTorch peer first, alone in memory.
	peer, perr := peerUpdate{}, fmt.Errorf("not run (-step_peer=false)")
	if o.peer {
		peer, perr = torchUpdate(o, e)
	}
	if perr != nil {
		fmt.Printf("step     PyTorch peer: %v\n", perr)
	} else {
		fmt.Printf("step     PyTorch update %.1f s (%d micro-batches of %d × %d), peak RSS %.2f GB\n",
			peer.Seconds, (seqs+o.microSeqs-1)/o.microSeqs, o.microSeqs, T, peer.MaxRSS/1e9)
	}
	runtime.GC()
	debug.FreeOSMemory()
	// A soft memory limit: with several GiB of weights, gradients and
	// moments live, Go's default pacing (GOGC=100) lets garbage grow to as
	// much again before collecting; the limit makes the collector run
	// earlier instead. The same works for cmd/train through GOMEMLIMIT.
	limit := "none"
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		limit = "GOMEMLIMIT=" + v
	} else if o.memLimitGiB > 0 {
		old := debug.SetMemoryLimit(int64(o.memLimitGiB * (1 << 30)))
		defer debug.SetMemoryLimit(old)
		limit = fmt.Sprintf("%.1f GiB", o.memLimitGiB)
	}
	resetPeakRSS()

	dev := cpu.New()
	t0 := time.Now()
	pol, err := model.Load(o.dir, dev, model.LMHeadOutput)
	if err != nil {
		return fail("load policy", err)
	}
	ref, err := model.LoadWith(o.dir, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "auto"})
	if err != nil {
		return fail("load reference", err)
	}
	if o.spillRef {
		if err := ref.SpillWeights(os.TempDir()); err != nil {
			return fail("spill reference", err)
		}
		runtime.GC()
		debug.FreeOSMemory() // the heap copy the mapping replaced
	}
	pol.SaveBytes = int64(o.saveGiB * (1 << 30))
	ocfg := optim.DefaultConfig()
	ocfg.StateDType = o.state
	opt, err := optim.New(dev, pol.Params, pol.Grads, ocfg, 1)
	if err != nil {
		return fail("optimizer", err)
	}
	if o.offloadOptim {
		if err := opt.Offload(os.TempDir()); err != nil {
			return fail("offload the optimizer", err)
		}
	}
	fmt.Printf("step     loaded policy (float32) and reference (%s) in %.1f s\n", dtypeOf(ref), time.Since(t0).Seconds())
	// Each phase's peak RSS: VmHWM read and reset at its end, the step's
	// peak the largest of them.
	var phases []string
	var peak float64
	mark := func(name string) {
		p := peakRSS()
		peak = max(peak, p)
		phases = append(phases, fmt.Sprintf("%s %.2f", name, p/1e9))
		resetPeakRSS()
	}
	mark("load")

	// Rollout: from the float32 policy and/or its bf16 copy (rollout.dtype
	// bfloat16: refreshed from the policy, bf16 dot products), the same
	// prompts and seeds; the batch is the last one's.
	var seqTokens [][]int32
	var f32tps float64
	for _, dtype := range o.rolloutDTypes {
		if dtype != "float32" && dtype != "bfloat16" {
			return fail("-step_rollout", fmt.Errorf("%q is neither float32 nor bfloat16", dtype))
		}
		sampler := pol
		var copyNote string
		if dtype == "bfloat16" {
			t0 := time.Now()
			c, err := pol.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true})
			if err != nil {
				return fail("rollout copy", err)
			}
			sampler = c
			copyNote = fmt.Sprintf(", copy rounded from the policy in %.1f s", time.Since(t0).Seconds())
			// Whether the copy's weights sit in huge pages (R1GO_HUGEPAGES=1
			// asks; the THP mode, the process's huge-page total).
			if mode := pages.Mode(); mode != "" && pages.On {
				copyNote += fmt.Sprintf(", THP %s: %d MiB of the process in huge pages (R1GO_HUGEPAGES=1)", mode, pages.AnonHugeBytes()>>20)
			}
		}
		// The products' ceiling: the float32 FMA peak, or for the bf16
		// copy the tile unit's in-cache product where it runs on AMX, else
		// the dot-product peak where its products use VDPBF16PS.
		isa, peakName := probe.BestISA(), "FMA"
		if on, _ := gemm.HasAMX(); dtype == "bfloat16" && on {
			isa, peakName = probe.AMXISA, "AMX"
		} else if dtype == "bfloat16" && gemm.HasDotBF16() {
			isa, peakName = probe.DotBF16ISA, "VDPBF16PS"
		}
		e.fmaPeak(isa) // probed before the rollout, and again after it
		bounds := func() (bw, peak float64) {
			for i := 0; i < 3; i++ {
				e.probePeaks(isa)
			}
			return e.reprobeBandwidth().Wall, e.fmaPeak(isa)
		}
		var lastBW, lastPeak float64
		measured := func() (float64, float64) {
			lastBW, lastPeak = bounds()
			return lastBW, lastPeak
		}
		toks, tps, r, err := rollout(o, sampler, seqs, T, measured, peakName, copyNote)
		if err != nil {
			return fail("rollout "+dtype, err)
		}
		last := func() (float64, float64) { return lastBW, lastPeak }
		if on, _ := gemm.HasAMX(); dtype == "bfloat16" && on && len(o.streams) > 0 {
			if err := takeTurns(o, sampler, seqs, T, last, peakName, streamVariants(o.streams)); err != nil {
				return fail("-step_streams", err)
			}
		}
		if dtype == "bfloat16" && o.kvPages {
			if err := takeTurns(o, sampler, seqs, T, last, peakName, kvPageVariants()); err != nil {
				return fail("-step_kvpages", err)
			}
		}
		if dtype == "float32" {
			f32tps = tps
		} else if f32tps > 0 {
			r.ratios = append(r.ratios, ratio{"float32 rollout, same run", tps / f32tps})
		}
		fmt.Println(r)
		rows = append(rows, r)
		seqTokens = toks
		mark("rollout " + dtype)
		if sampler != pol {
			sampler.DiscardWeights()
		}
	}

	// The batch: every sequence prompt + response, random advantages.
	b := model.Batch{Seqs: []int32{0}}
	for _, s := range seqTokens {
		b.Tokens = append(b.Tokens, s...)
		b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
	}
	adv := make([]float32, len(b.Tokens))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range adv {
		adv[i] = float32(rng.NormFloat64())
	}
	trainerMicro := o.trainerMicro
	if trainerMicro <= 0 {
		trainerMicro = 8192
	}
	scorers := []struct {
		name string
		m    *model.Model
	}{{"old log-probs", pol}, {"reference log-probs", ref}}
	if !o.score {
		scorers = nil
	}
	for _, sc := range scorers {
		t0 = time.Now()
		for _, mb := range microBatches(b, trainerMicro, 0) {
			if _, err := sc.m.Forward(mb, false); err != nil {
				return fail(sc.name, err)
			}
		}
		sec := time.Since(t0).Seconds()
		note := fmt.Sprintf("%.1f s", sec)
		mark(sc.name)
		if sc.m.Spilled() {
			sc.m.DropWeightPages() // until the next step's scoring
			note += ", weights paged in from their file mapping and dropped after"
		}
		r := stepRow(fmt.Sprintf("%s, %d-token micro-batches", sc.name, trainerMicro), float64(len(b.Tokens))/sec, "tok/s", note)
		fmt.Println(r)
		rows = append(rows, r)
	}

	if !o.update {
		return rows
	}
	update := func(mbs []model.Batch) (wall, cpu float64, err error) {
		pol.ZeroGrads()
		t0, c0 := time.Now(), cpuSeconds()
		off := 0
		for _, mb := range mbs {
			g := make([]float32, len(mb.Tokens))
			for i := range g {
				g[i] = -adv[off+i] / float32(len(b.Tokens)) // d/dlogprob of −Σ A·logprob / N
			}
			off += len(mb.Tokens)
			if _, err := pol.Forward(mb, true); err != nil {
				return 0, 0, err
			}
			if err := pol.Backward(g, nil, nil); err != nil {
				return 0, 0, err
			}
		}
		mark("update fwd+bwd")
		if opt.Offloaded() {
			pol.DiscardActivations() // the moments come in: the activations make room
		}
		opt.Step(1)
		mark("AdamW")
		return time.Since(t0).Seconds(), cpuSeconds() - c0, nil
	}
	same := microBatches(b, 0, o.microSeqs)
	sec, cpu, err := update(same)
	if err != nil {
		return fail("update", err)
	}
	r := stepRow(fmt.Sprintf("update fwd+bwd+AdamW, %d micro-batches of %d × %d", len(same), o.microSeqs, T),
		float64(len(b.Tokens))/sec, "tok/s", fmt.Sprintf("r1go %.1f s (%.1f CPU s)", sec, cpu))
	if perr == nil {
		r.ratios = []ratio{{"PyTorch time (goal ≤ 0.7)", sec / peer.Seconds}, {"PyTorch CPU time", cpu / peer.CPU}}
		r.note += fmt.Sprintf(", PyTorch %.1f s (%.1f CPU s)", peer.Seconds, peer.CPU)
	} else {
		r.note += ", PyTorch peer: " + perr.Error()
	}
	fmt.Println(r)
	rows = append(rows, r)
	if o.trainerMicro > 0 {
		def := microBatches(b, o.trainerMicro, 0)
		sec2, cpu2, err := update(def)
		if err != nil {
			return fail("update", err)
		}
		r := stepRow(fmt.Sprintf("update fwd+bwd+AdamW, %d-token micro-batches (trainer default)", o.trainerMicro),
			float64(len(b.Tokens))/sec2, "tok/s", fmt.Sprintf("r1go %.1f s (%.1f CPU s)", sec2, cpu2))
		if perr == nil {
			r.ratios = []ratio{{"PyTorch time", sec2 / peer.Seconds}, {"PyTorch CPU time", cpu2 / peer.CPU}}
		}
		fmt.Println(r)
		rows = append(rows, r)
	}
	hwm := max(peak, peakRSS())
	r = stepRow("peak RSS by phase (VmHWM, GB)", hwm/1e9, "GB", strings.Join(phases, ", "))
	fmt.Println(r)
	rows = append(rows, r)
	spill := ""
	if ref.Spilled() {
		spill = " spilled to a file mapping"
	}
	if opt.Offloaded() {
		spill += ", AdamW moments offloaded likewise"
	}
	r = stepRow("peak RSS of the Go step (VmHWM)", hwm/1e9, "GB", fmt.Sprintf("AdamW moments %s, reference %s%s, saved-layer bound %.2f GiB, collector limit %s",
		o.state, dtypeOf(ref), spill, o.saveGiB, limit))
	r.ratios = []ratio{{"8 GB goal", hwm / 8e9}}
	if perr == nil {
		r.ratios = append(r.ratios, ratio{"PyTorch peak RSS", hwm / peer.MaxRSS})
	}
	fmt.Println(r)
	return append(rows, r)
}

// cpuSeconds is this process's CPU time (0 where unknown).
func cpuSeconds() float64 {
	d, _ := probe.ProcessCPUTime()
	return d.Seconds()
}

func stepRow(name string, v float64, unit, note string) row {
	return row{section: "step", name: name, value: v, unit: unit, note: note}
}

func dtypeOf(m *model.Model) string {
	if cpu.IsBF16(m.Params) {
		return "bfloat16"
	}
	return "float32"
}

// microBatches cuts b at sequence boundaries, as rl.MicroBatches does: at
// most maxTokens tokens (a sequence longer than that alone), or exactly
// seqs sequences when seqs > 0.
func microBatches(b model.Batch, maxTokens, seqs int) []model.Batch {
	var out []model.Batch
	n := len(b.Seqs) - 1
	for i := 0; i < n; {
		j := i + 1
		if seqs > 0 {
			j = min(i+seqs, n)
		} else {
			for j < n && b.Seqs[j+1]-b.Seqs[i] <= int32(maxTokens) {
				j++
			}
		}
		mb := model.Batch{Tokens: b.Tokens[b.Seqs[i]:b.Seqs[j]]}
		for k := i; k <= j; k++ {
			mb.Seqs = append(mb.Seqs, b.Seqs[k]-b.Seqs[i])
		}
		out = append(out, mb)
		i = j
	}
	return out
}

// ensureFolder generates the random-weight folder with memstep when it is
// missing (a child process, so this one's peak does not count it).
func ensureFolder(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		return nil
	}
	fmt.Printf("step     generating %s (go run ./benchmarks/cpu/memstep -gen)\n", dir)
	cmd := exec.Command("go", "run", "./memstep", "-gen", "-dir", dir)
	cmd.Dir = benchDir()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// peerUpdate is train_step.py's answer in mode "update".
type peerUpdate struct {
	Seconds float64 // forward+backward of every micro-batch and the AdamW step
	CPU     float64 // CPU seconds of the same (all threads)
	MaxRSS  float64 // bytes
}

// torchUpdate runs train_step.py in mode "update" with the step's shapes.
func torchUpdate(o stepOptions, e *env) (peerUpdate, error) {
	raw, err := os.ReadFile(filepath.Join(o.dir, "config.json"))
	if err != nil {
		return peerUpdate{}, err
	}
	cfg, err := model.ParseConfig(raw, "config.json")
	if err != nil {
		return peerUpdate{}, err
	}
	args, _ := json.Marshal(map[string]any{"mode": "update", "C": cfg.HiddenSize, "L": cfg.NumHiddenLayers,
		"NH": cfg.NumAttentionHeads, "KVH": cfg.NumKeyValueHeads, "I": cfg.IntermediateSize, "V": cfg.VocabSize,
		"seqs": o.prompts * o.n, "seqlen": o.promptLen + o.respLen, "micro_seqs": o.microSeqs, "threads": e.threads})
	cmd := exec.Command(pythonWithTorch(), filepath.Join(benchDir(), "train_step.py"), string(args))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return peerUpdate{}, err
	}
	var res struct {
		Seconds    float64
		CPUSeconds float64 `json:"cpu_seconds"`
		MaxRSSKiB  float64 `json:"max_rss_kib"`
	}
	if err := json.Unmarshal([]byte(lastLine(string(out))), &res); err != nil {
		return peerUpdate{}, fmt.Errorf("unreadable output %q: %v", out, err)
	}
	return peerUpdate{Seconds: res.Seconds, CPU: res.CPUSeconds, MaxRSS: res.MaxRSSKiB * 1024}, nil
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux ≥ 4.0).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in bytes (0 where /proc is missing).
func peakRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(v, "%f", &kb)
			return kb * 1024
		}
	}
	return 0
}

// rollout prefills seqs random prompts on m and decodes respLen tokens for
// all of them at once, sampling at temperature 1 (fixed seeds: the same
// prompts and draws for every m), and returns the sequences and the decode
// row: tokens/s ÷ the batch's weight-read bound (the bytes of m's weights,
// read once per step, at the probed bandwidth bw GB/s), and ÷ its compute
// bound (the step's flops at the probed peak GFLOP/s of the products'
// instruction) and the lower of the two (the roofline): a batch of 32
// does 64 flops per weight read, which on a CPU of few cores takes longer
// than reading it.
//
// bounds gives the read bandwidth (GB/s) and the products' peak (GFLOP/s;
// 0: none) the ratios divide by: called after the decode, so that a probe
// can run on both sides of it and a slow moment of the machine in one
// probe does not flatter the ratios.
func rollout(o stepOptions, m *model.Model, seqs, T int, bounds func() (bw, peak float64), peakName, note string) ([][]int32, float64, row, error) {
	cfg := m.Config
	rng := rand.New(rand.NewPCG(3, 4))
	cache := m.NewKVCache(seqs, T)
	defer cache.Free(m.Dev)
	chunks := make([]model.Chunk, seqs)
	seqTokens := make([][]int32, seqs)
	for s := range chunks {
		p := make([]int32, o.promptLen)
		for i := range p {
			p[i] = int32(rng.IntN(cfg.VocabSize))
		}
		chunks[s] = model.Chunk{Slot: s, Tokens: p}
		seqTokens[s] = p
	}
	samp := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	seeds := make([]uint64, seqs)
	t0 := time.Now()
	if _, err := m.Step(cache, chunks); err != nil {
		return nil, 0, row{}, err
	}
	prefill := time.Since(t0).Seconds()
	for s := range chunks {
		chunks[s].Tokens = []int32{int32(rng.IntN(cfg.VocabSize))}
	}
	// The decode's wall time by operation (cpu.TimeOps): what the
	// products take of a step, and what the host work between them does.
	ops := cpu.TimeOps(m.Dev, true)
	t0 = time.Now()
	for step := 0; step < o.respLen; step++ {
		for s := range seeds {
			seeds[s] = rng.Uint64()
			seqTokens[s] = append(seqTokens[s], chunks[s].Tokens[0])
		}
		out, err := m.StepSample(cache, chunks, samp, seeds, nil)
		if err != nil {
			return nil, 0, row{}, err
		}
		for s := range chunks {
			chunks[s].Tokens[0] = out.Tokens[s]
		}
	}
	decode := time.Since(t0).Seconds()
	cpu.TimeOps(m.Dev, false)
	if ops != nil {
		fmt.Printf("step     decode wall time a step (%s weights): %s\n", dtypeOf(m), decodeSplit(ops, decode, o.respLen))
	}
	bw, peak := bounds()
	bytesPer := 4.0
	if cpu.IsBF16(m.Params) {
		bytesPer = 2
	}
	weightBytes := bytesPer * float64(m.NumParams()) // every weight once per step (tied head: once)
	kvw := float64(cfg.NumKeyValueHeads * cfg.HeadDim())
	kvBytesPer := 4.0
	if cpu.IsBF16(cache.K[0]) { // a rollout copy's cache
		kvBytesPer = 2
	}
	kvBytes := float64(cfg.NumHiddenLayers) * 2 * kvw * kvBytesPer * float64(seqs) * float64(o.promptLen+o.respLen/2)
	bound := float64(seqs) * bw * 1e9 / weightBytes
	tps := float64(seqs*o.respLen) / decode
	r := stepRow(fmt.Sprintf("rollout decode (%s weights), batch %d, %d steps", dtypeOf(m), seqs, o.respLen), tps, "tok/s",
		fmt.Sprintf("%.0f tok/s bound: %.2f GB of weights per step at %.1f GB/s; with the KV cache read too %.2f×; prefill %d × %d tokens %.1f tok/s%s",
			bound, weightBytes/1e9, bw, tps*(weightBytes+kvBytes)/float64(seqs)/(bw*1e9), seqs, o.promptLen, float64(seqs*o.promptLen)/prefill, note))
	r.ratios = []ratio{{"weight-read bound (goal ≥ 0.6)", tps / bound}}
	if peak > 0 {
		flops := decodeFlops(cfg, o.promptLen+o.respLen/2)
		computeBound := peak * 1e9 / flops
		r.ratios = append(r.ratios, ratio{peakName + "-peak compute bound", tps / computeBound},
			ratio{"roofline (the lower bound)", tps / min(bound, computeBound)})
		r.note += fmt.Sprintf("; compute bound %.0f tok/s (%.1f GFLOP a token at %.1f GFLOP/s)", computeBound, flops/1e9, peak)
	}
	return seqTokens, tps, r, nil
}

// variant is one way of running the bf16 rollout's decode, for turns:
// set puts it in place, reset puts back what was there before.
type variant struct {
	name       string
	set, reset func() error
}

// streamVariants are the ways of reading the weights on the AMX path
// (R1GO_AMX_STREAM values, gemm.SetAMXStream).
func streamVariants(values []string) []variant {
	var vs []variant
	for _, v := range values {
		vs = append(vs, variant{
			name:  fmt.Sprintf("R1GO_AMX_STREAM=%q", v),
			set:   func() error { return gemm.SetAMXStream(v) },
			reset: func() error { return gemm.SetAMXStream(os.Getenv("R1GO_AMX_STREAM")) },
		})
	}
	return vs
}

// kvPageVariants are the rollout copy's KV cache in huge pages and in
// 4 KiB pages (cpu.KVCacheHugePages, read as each rollout makes its
// cache).
func kvPageVariants() []variant {
	was := cpu.KVCacheHugePages
	reset := func() error { cpu.KVCacheHugePages = was; return nil }
	return []variant{
		{name: "KV cache in huge pages", set: func() error { cpu.KVCacheHugePages = true; return nil }, reset: reset},
		{name: "KV cache in 4 KiB pages", set: func() error { cpu.KVCacheHugePages = false; return nil }, reset: reset},
	}
}

// takeTurns decodes the rollout again in each variant, taking turns three
// times in this one process, so that the comparison does not span
// processes on a machine whose speed drifts between them; each turn
// prints its tokens/s (and its wall time by operation), then the median
// of each variant. What was in place before is put back.
func takeTurns(o stepOptions, m *model.Model, seqs, T int, bounds func() (float64, float64), peakName string, vs []variant) (err error) {
	defer func() {
		for _, v := range vs {
			err = errors.Join(err, v.reset())
		}
	}()
	tps := make([][]float64, len(vs))
	for turn := 1; turn <= 3; turn++ {
		for i, v := range vs {
			if err := v.set(); err != nil {
				return err
			}
			_, t, _, err := rollout(o, m, seqs, T, bounds, peakName, "")
			if err != nil {
				return err
			}
			tps[i] = append(tps[i], t)
			fmt.Printf("step     bf16 decode, %s, turn %d: %.1f tok/s\n", v.name, turn, t)
		}
	}
	for i, v := range vs {
		ts := slices.Sorted(slices.Values(tps[i]))
		fmt.Printf("step     bf16 decode, %s: median %.1f tok/s (%.1f-%.1f)\n", v.name, ts[len(ts)/2], ts[0], ts[len(ts)-1])
	}
	return nil
}

// decodeSplit lists a decode's wall time a step by operation, the
// longest first, each with its share of the decode and the part of it
// spent waiting at its parallel loops' ends (uneven tasks, late helpers),
// what no timed operation covers (the step's own code, building the next
// step's input), then all the waits together.
func decodeSplit(ops *cpu.OpTimes, decode float64, steps int) string {
	var parts []string
	var timed time.Duration
	for _, op := range ops.Split() {
		timed += op.Time
		part := fmt.Sprintf("%s %.2f ms (%.1f%%", op.Op, op.Time.Seconds()*1e3/float64(steps), 100*op.Time.Seconds()/decode)
		if op.Wait > 0 {
			part += fmt.Sprintf("; waits %.2f ms", op.Wait.Seconds()*1e3/float64(steps))
		}
		parts = append(parts, part+")")
	}
	rest := decode - timed.Seconds()
	parts = append(parts, fmt.Sprintf("untimed %.2f ms (%.1f%%)", rest*1e3/float64(steps), 100*rest/decode))
	jw := ops.JoinWait().Seconds()
	return strings.Join(parts, ", ") + fmt.Sprintf("; of all that, waiting at parallel loops' ends %.2f ms (%.1f%%)", jw*1e3/float64(steps), 100*jw/decode)
}

// decodeFlops is the floating-point work of decoding one token at a
// context of ctx tokens: two flops per weight of every projection and of
// the LM head, and the attention's scores and weighted sum over the
// context (the norms, RoPE and SwiGLU, a few flops per activation, are
// left out).
func decodeFlops(cfg *model.Config, ctx int) float64 {
	h, hd := float64(cfg.HiddenSize), float64(cfg.HeadDim())
	q, kv := float64(cfg.NumAttentionHeads)*hd, float64(cfg.NumKeyValueHeads)*hd
	proj := h*q + 2*h*kv + q*h + 3*h*float64(cfg.IntermediateSize)
	attn := 2 * float64(cfg.NumAttentionHeads) * hd * float64(ctx)
	return 2 * (float64(cfg.NumHiddenLayers)*(proj+attn) + h*float64(cfg.VocabSize))
}
