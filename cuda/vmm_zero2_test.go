package cuda

import (
	"fmt"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/dp"
)

// TestGPUZeroTwoVMM runs ZeRO-2 data parallel on two emulated GPUs, one
// Device per rank on a goroutine of its own, linked by an in-process
// communicator (loopComm), in mixed precision as cmd/train trains. Each
// rank runs two micro-batches per step, so between them the backward maps
// again what the first one's reduce-scatters gave back, then a step
// without a backward (every bucket sent from the given-back arena). It
// checks that
//   - the weights equal, bit for bit, those of the same run on Devices
//     without VMM (plain cuMemAlloc arenas, zeroed in place);
//   - with one micro-batch per step (the next step's backward maps again
//     what the last one gave back) and no clipping, they equal bit for bit
//     those of the unsharded run (dp.zero 0: one all-reduce of the whole
//     arena), as the sums are the same float32 additions in the same order
//     and AdamW is elementwise (with two micro-batches ZeRO-2 sums
//     Σ_j reduce(g_j) against reduce(Σ_j g_j), and with clipping the norm's
//     float64 partial sums in another order: rl's tests bound those);
//   - with sharded master weights (dp.shard_masters, ZeRO-1 and 2, and a
//     tied Qwen3) the fp32 weights a checkpoint saves and the bf16 compute
//     copy equal the unsharded run's bit for bit, and the fp32 arena keeps
//     only the shard, the norms and biases;
//   - the allocation log shows the gradient arena's chunks outside what a
//     rank keeps unmapped after their buckets were sent, and mapped again
//     by the next backward;
//   - the arena never held more mapped memory than the plan's transient
//     part in chunks (plan.ZeroTwoTransientPaged), and after a step no more
//     than the bucket edges.
func TestGPUZeroTwoVMM(t *testing.T) {
	g := gpuOrSkip(t)
	if on, note := g.VMM(); !on {
		t.Skipf("no VMM here: %s", note)
	}
	if vmmMaxPending != plan.CUDAPending {
		t.Fatalf("the device lets %d spans wait, the plan counts %d", vmmMaxPending, plan.CUDAPending)
	}
	cfg, err := model.ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256,
		"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
		"tie_word_embeddings": false}`), "zero2 vmm test config")
	if err != nil {
		t.Fatal(err)
	}
	// 16 KiB chunks (the emulator's granularity for the Devices opened
	// here), so that the small model's arena spans 64 of them.
	t.Setenv("R1GO_EMU_VMM_CHUNK", "16384")
	const chunk = 16384 / 4
	const size, steps = 2, 3
	aligned := float64(4*chunk) / (1 << 20)   // b = one chunk: buckets of two chunks
	unaligned := float64(3*chunk) / (1 << 20) // b = ¾ chunk: every other bucket edge inside a chunk
	oc := optim.DefaultConfig()
	oc.LR, oc.GradClip = 1e-3, 0
	batch := func(rank, step, j int) (model.Batch, []float32) {
		var b model.Batch
		b.Seqs = []int32{0}
		for s := range 2 {
			n := 7 + (rank*5+j*3+s)%5
			for i := range n {
				b.Tokens = append(b.Tokens, int32((i*13+rank*31+j*7+step*5+s)%96))
			}
			b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
		}
		gr := make([]float32, len(b.Tokens))
		for i := range gr {
			gr[i] = float32(math.Sin(float64(i+rank*17+j*3+step))) * 0.1
		}
		return b, gr
	}
	type rankRun struct {
		weights []float32
		compute []float32 // the bf16 compute copy
		arena   uintptr   // the gradient arena's address and bytes
		bytes   int
		peak    int64 // most bytes of the arena mapped at a callback
		after   int64 // bytes of the arena mapped after the last step
		logFrom int64
		steps   []int64 // log offsets at the end of each step
	}
	saveDir := t.TempDir()
	run := func(stage int, noVMM bool, nMicro int, bucketMB float64, masters bool) [size]rankRun {
		grp := newLoopGroup(size)
		var out [size]rankRun
		var wg sync.WaitGroup
		errs := make([]error, size)
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = func() error {
					d, err := OpenWith(Options{VMM: !noVMM})
					if err != nil {
						return err
					}
					if !noVMM && d.vm.gran != 4*chunk {
						return fmt.Errorf("VMM chunks of %d bytes, want %d", d.vm.gran, 4*chunk)
					}
					defer d.Close()
					m, err := model.New(cfg, d, model.LMHeadOutput)
					if err != nil {
						return err
					}
					m.InitRandom(3)
					d.UseBF16(m.Params)
					dc := dp.DefaultConfig()
					dc.BucketMB, dc.Zero, dc.ShardMasters = bucketMB, stage, masters
					par, err := dp.New(loopComm{rank: r, g: grp, dev: d}, dc)
					if err != nil {
						return err
					}
					par.MeasureGrads = true
					o, err := par.NewOptimizer(d, m.Params, m.Grads, oc, 10)
					if err != nil {
						return err
					}
					if masters {
						if err := par.ShardMasters(m, o); err != nil {
							return err
						}
						// Kept: this rank's shard, the norm weights and biases,
						// and the chunks they start and end in.
						held, runs := 0, 0
						for _, t := range m.Tensors() {
							if len(t.Shape) == 1 {
								held += t.Shape[0]
								runs++
							}
						}
						own, _ := plan.ZeroShard(m.Params.Len(), optim.NewShardLayout(m.Params.Len(), int(bucketMB*(1<<20)/4), size).Bucket, size)
						bound := 4 * (int64(held) + own + int64(2*(runs+m.Params.Len()/(size*chunk)+2)*chunk))
						if got, _ := d.PagedBytes(m.Params); got > bound || got >= int64(4*m.Params.Len()) {
							return fmt.Errorf("sharded masters: %d B of the %d B fp32 arena still mapped, want at most %d", got, 4*m.Params.Len(), bound)
						}
					}
					res := &out[r]
					res.arena, res.bytes = m.Grads.(Buffer).ptr, 4*m.Grads.Len()
					res.logFrom = logSize(t)
					for step := range steps {
						par.ZeroGrads(m, o)
						micro := nMicro
						if step == steps-1 {
							micro = 0 // a step with nothing to learn from: every bucket sent from the given-back arena
						}
						for j := range micro {
							b, gr := batch(r, step, j)
							if _, err := m.Forward(b, true); err != nil {
								return err
							}
							if err := m.Backward(gr, nil, nil); err != nil {
								return err
							}
						}
						if res, err := par.Step(m, o); err != nil || res.Skipped {
							return fmt.Errorf("step %d: %+v %v", step, res, err)
						}
						res.steps = append(res.steps, logSize(t))
					}
					if _, _, peak, ok := par.ZeroTwoStats(o); ok {
						res.peak = peak
					}
					res.after, _ = d.PagedBytes(m.Grads)
					res.weights = make([]float32, m.Params.Len())
					res.compute = make([]float32, m.Params.Len())
					cc, _ := d.ComputeCopy(m.Params)
					d.Download(res.compute, cc)
					if !masters {
						d.Download(res.weights, m.Params)
						return d.Sync()
					}
					// The checkpoint path: the masters gathered on rank 0's
					// host, written by Save, read back on the CPU.
					// The weights check reads the compute copy (the fp32
					// masters outside the shard are gone): the ranks agree.
					if err := (&rl.Trainer{Sync: par, Policy: m}).CheckInSync(); err != nil {
						return err
					}
					dir := fmt.Sprintf("%s/rank%d", saveDir, r)
					if err := par.WithMasters(m, func() error {
						if r != 0 {
							return nil
						}
						return m.Save(dir, nil, model.SaveOptions{DType: "float32"})
					}); err != nil {
						return err
					}
					if r != 0 {
						res.weights = nil // only rank 0 holds them whole
						return d.Sync()
					}
					back, err := model.Load(dir, cpu.New(), model.LMHeadOutput)
					if err != nil {
						return err
					}
					back.Dev.Download(res.weights, back.Params)
					return d.Sync()
				}()
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("stage %d, NoVMM %v, rank %d: %v", stage, noVMM, r, err)
			}
		}
		return out
	}
	same := func(what string, a, b [size]rankRun) {
		t.Helper()
		for r := range size {
			if a[r].weights == nil {
				continue // a rank whose sharded masters are not gathered
			}
			for i, v := range a[r].weights {
				if v != b[r].weights[i] {
					t.Fatalf("rank %d: weight %d is %v %s (%g apart)", r, i, v, what, v-b[r].weights[i])
				}
			}
		}
	}
	paged := run(2, false, 2, aligned, false)
	same("with VMM, two micro-batches, and differs without VMM", paged, run(2, true, 2, aligned, false))
	whole := run(2, true, 2, unaligned, false)
	same("with VMM, buckets not of whole chunks, and differs without VMM", run(2, false, 2, unaligned, false), whole)
	// As on a busy GPU: no event has passed when polled, so given-back
	// chunks wait, up to vmmMaxPending spans, and MapPages waits for them.
	t.Setenv("R1GO_EMU_EVENTS_LAG", "1")
	same("with VMM and a busy stream, and differs without VMM", run(2, false, 2, unaligned, false), whole)
	os.Setenv("R1GO_EMU_EVENTS_LAG", "0")
	flat := run(0, true, 1, aligned, false)
	same("with ZeRO-2 and VMM, one micro-batch, and differs in the unsharded run", run(2, false, 1, aligned, false), flat)
	// Sharded masters (dp.shard_masters): the fp32 weights gathered whole
	// (WithMasters) and the bf16 compute copy the model computes with
	// are the unsharded run's, at stage 2 and at stage 1.
	// Rank r owns chunk r of every bucket: buckets of 4 chunks per rank
	// leave whole chunks of the other rank's masters to give back.
	big := float64(4*4*chunk) / (1 << 20)
	flatU := run(0, true, 1, big, false)
	for _, stage := range []int{2, 1} {
		sh := run(stage, false, 1, big, true)
		same(fmt.Sprintf("with ZeRO-%d's sharded masters, and differs in the unsharded run", stage), sh, flatU)
		for r := range size {
			for i, v := range sh[r].compute {
				if v != flatU[r].compute[i] {
					t.Fatalf("rank %d: compute-copy weight %d is %v with ZeRO-%d's sharded masters, %v in the unsharded run", r, i, v, stage, flatU[r].compute[i])
				}
			}
		}
	}
	t.Logf("ZeRO-2 with VMM: the weights of the run without VMM (two micro-batches) and of the unsharded run (one), bit for bit; with sharded masters (ZeRO-1 and 2) the unsharded run's fp32 weights and bf16 compute copy, bit for bit")

	// Memory: the arena's mapped bytes against the plan's transient part.
	n := len(paged[0].weights)
	bucket := max(1, min(chunk, (n+size-1)/size))
	L := int64(len(paged[0].weights)-2*cfg.VocabSize*cfg.HiddenSize-cfg.HiddenSize) / int64(cfg.NumHiddenLayers)
	seg := max(L, int64(cfg.VocabSize*cfg.HiddenSize))
	tr := plan.ZeroTwoTransientPaged(int64(n), seg, int64(bucket), size, int64(chunk))
	edges := int64(2) // buckets of whole chunks: the arena's ends
	for r := range size {
		p := paged[r]
		if p.peak <= 0 || p.peak > 4*tr || p.after > edges*int64(4*chunk) {
			t.Fatalf("rank %d: the %d B gradient arena had at most %d B mapped (plan: %d B), %d B after the last step (the %d bucket edges: %d B)",
				r, p.bytes, p.peak, 4*tr, p.after, edges, edges*int64(4*chunk))
		}
		t.Logf("rank %d: gradient arena %d B, mapped at most %d B (plan %d B), %d B after the steps", r, p.bytes, p.peak, 4*tr, p.after)
		if p.logFrom < 0 {
			continue
		}
		// The log: chunks given back in step 0 and mapped again in step 1.
		unmapped := chunkSet(logLines(t, p.logFrom, "unmap", p.arena, uintptr(p.bytes)))
		arenaChunks := (p.bytes + 4*chunk - 1) / (4 * chunk)
		if int64(len(unmapped)) < int64(arenaChunks)-edges {
			t.Fatalf("rank %d: %d of the arena's %d chunks were unmapped, want all but the %d bucket edges", r, len(unmapped), arenaChunks, edges)
		}
		var again int
		remapped := chunkSet(logLines(t, p.steps[0], "map", p.arena, uintptr(p.bytes)))
		for c := range unmapped {
			if remapped[c] {
				again++
			}
		}
		if again < len(unmapped)-int(edges) {
			t.Fatalf("rank %d: of %d chunks given back only %d were mapped again by later steps", r, len(unmapped), again)
		}
		t.Logf("rank %d: allocation log: %d of %d arena chunks unmapped after their buckets were sent, %d mapped again by later backwards", r, len(unmapped), arenaChunks, again)
	}
	// A tied Qwen3 (per-head q/k norms kept in fp32; the LM head and the
	// embedding read one table): sharded masters still equal the
	// unsharded run, weights and compute copy.
	if cfg, err = model.ParseConfig([]byte(`{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 256,
		"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 96,
		"tie_word_embeddings": true}`), "zero2 vmm qwen3 config"); err != nil {
		t.Fatal(err)
	}
	q0, q1 := run(0, true, 1, big, false), run(2, false, 1, big, true)
	same("with a tied Qwen3's sharded masters, and differs in the unsharded run", q1, q0)
	for r := range size {
		for i, v := range q1[r].compute {
			if v != q0[r].compute[i] {
				t.Fatalf("tied Qwen3, rank %d: compute-copy weight %d is %v with sharded masters, %v unsharded", r, i, v, q0[r].compute[i])
			}
		}
	}
}

// loopComm is an in-process model.Comm over the Devices of several
// goroutines: every collective downloads each rank's part, sums in rank
// order in float32 (so a reduce-scatter and an all-reduce of the same
// values agree bit for bit) and uploads the rank's result.
type loopComm struct {
	rank int
	g    *loopGroup
	dev  *Device
}

type loopGroup struct {
	mu    sync.Mutex
	cond  *sync.Cond
	size  int
	n     int
	round int
	f     [][]float32
	b     [][]byte
	outF  [][]float32
	outB  [][]byte
}

func newLoopGroup(size int) *loopGroup {
	g := &loopGroup{size: size, f: make([][]float32, size), b: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// exchange hands in this rank's parts and returns every rank's.
func (c loopComm) exchange(f []float32, b []byte) ([][]float32, [][]byte) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.f[c.rank], g.b[c.rank] = f, b
	if g.n++; g.n == g.size {
		g.outF, g.outB = append([][]float32(nil), g.f...), append([][]byte(nil), g.b...)
		g.n, g.round = 0, g.round+1
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	return g.outF, g.outB
}

func (c loopComm) host(b model.Buffer) []float32 {
	x := make([]float32, b.Len())
	c.dev.Download(x, b)
	return x
}

// sum adds the ranks' parts [lo, lo+n) in rank order.
func sum(parts [][]float32, lo, n int) []float32 {
	out := make([]float32, n)
	for _, p := range parts {
		for i := range out {
			out[i] += p[lo+i]
		}
	}
	return out
}

func (c loopComm) Rank() int { return c.rank }
func (c loopComm) Size() int { return c.g.size }
func (c loopComm) AllReduce(buf model.Buffer) error {
	parts, _ := c.exchange(c.host(buf), nil)
	c.dev.Upload(buf, sum(parts, 0, buf.Len()))
	return nil
}
func (c loopComm) ReduceScatter(dst, src model.Buffer) error {
	comm.CheckCollective("ReduceScatter", dst.Len(), src.Len(), c.g.size)
	parts, _ := c.exchange(c.host(src), nil)
	c.dev.Upload(dst, sum(parts, c.rank*dst.Len(), dst.Len()))
	return nil
}
func (c loopComm) AllGather(dst, src model.Buffer) error {
	comm.CheckCollective("AllGather", src.Len(), dst.Len(), c.g.size)
	parts, _ := c.exchange(c.host(src), nil)
	var all []float32
	for _, p := range parts {
		all = append(all, p...)
	}
	c.dev.Upload(dst, all)
	return nil
}
func (c loopComm) Broadcast(buf model.Buffer, root int) error {
	parts, _ := c.exchange(c.host(buf), nil)
	c.dev.Upload(buf, parts[root])
	return nil
}
func (c loopComm) Barrier() error { c.exchange(nil, nil); return nil }
func (c loopComm) GatherBytes(src []byte) ([]byte, error) {
	_, parts := c.exchange(nil, append([]byte(nil), src...))
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	return all, nil
}
func (c loopComm) Close() error { return nil }
