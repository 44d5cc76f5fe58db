// Command dp benchmarks data-parallel training on MPI: the step time of a
// fixed global batch on 1 and on N ranks (scaling efficiency), and the
// bucketed gradient all-reduce against one plain MPI all-reduce of the same
// size, both timed in the same run on the same ranks.
//
//	go run ./benchmarks/dp [-np 2] [-reps 5] [-bucket_mb 25]
//
// It starts itself under mpirun (one rank per core, --bind-to core) once
// with 1 rank and once with -np ranks; each rank trains a Qwen2-shaped
// model with random weights on its share of 8 packed sequences of 256
// tokens (forward, backward, gradient all-reduce, AdamW).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/comm/mpi"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl/dp"
)

type result struct {
	Ranks            int     `json:"ranks"`
	Threads          int     `json:"threads"`
	Params           int     `json:"params"`
	StepS            float64 `json:"step_s"`            // best step: forward, backward, all-reduce, AdamW
	AllReduceS       float64 `json:"allreduce_s"`       // best bucketed all-reduce of the gradient arena
	PlainS           float64 `json:"plain_allreduce_s"` // best single MPI all-reduce of the same values
	BusGBs, PlainGBs float64
	// The same step with ZeRO-1, ZeRO-2 (buckets sent while the backward
	// runs) and ZeRO-2 without the overlap (every bucket sent after the
	// backward), timed in the same run on the same ranks.
	Zero1S, Zero2S, Zero2SyncS float64
	Load                       string `json:"load"`
}

func main() {
	np := flag.Int("np", 2, "ranks of the data-parallel run")
	reps := flag.Int("reps", 5, "timed repetitions (the best is kept)")
	bucket := flag.Float64("bucket_mb", 25, "all-reduce bucket, MB")
	child := flag.Bool("child", false, "a rank (started by mpirun)")
	device := devsel.Flag(flag.CommandLine)
	flag.Parse()
	if *child {
		if err := rank(*device, *reps, *bucket); err != nil {
			fmt.Fprintln(os.Stderr, "dp:", err)
			os.Exit(1)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	var rs []result
	for _, n := range []int{1, *np} {
		cmd := exec.Command("mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "core", "-np", strconv.Itoa(n),
			self, "-child", "-device", *device, "-reps", strconv.Itoa(*reps), "-bucket_mb", fmt.Sprint(*bucket))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			fail(fmt.Errorf("mpirun -np %d: %v\n%s", n, err, out))
		}
		var r result
		line := strings.TrimSpace(string(out))
		if i := strings.LastIndex(line, "\n"); i >= 0 {
			line = line[i+1:]
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			fail(fmt.Errorf("rank 0 printed %q: %v", out, err))
		}
		rs = append(rs, r)
	}
	one, many := rs[0], rs[1]
	fmt.Printf("model: %d parameters; global batch 8 × 256 tokens; load average at start %s / %s\n\n", one.Params, one.Load, many.Load)
	fmt.Println("| ranks | threads/rank | step s | speed-up | scaling efficiency | grad all-reduce s | bus GB/s | plain MPI all-reduce s | bus GB/s | bucketed / plain time |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		sp := one.StepS / r.StepS
		ratio := "—"
		if r.PlainS > 0 {
			ratio = fmt.Sprintf("%.2f", r.AllReduceS/r.PlainS)
		}
		fmt.Printf("| %d | %d | %.3f | %.2f × | %.2f | %.4f | %.2f | %.4f | %.2f | %s |\n", r.Ranks, r.Threads, r.StepS, sp, sp/float64(r.Ranks),
			r.AllReduceS, r.BusGBs, r.PlainS, r.PlainGBs, ratio)
	}
	fmt.Printf("\n%d ranks, the same step by ZeRO stage (same run, same ranks; ratio to the all-reduce step):\n\n", many.Ranks)
	fmt.Println("| dp.zero | step s | / all-reduce step |")
	fmt.Println("|---|---|---|")
	for _, z := range []struct {
		name string
		s    float64
	}{{"0 (bucketed all-reduce after the backward)", many.StepS}, {"1 (reduce-scatter after the backward, all-gather)", many.Zero1S},
		{"2 (reduce-scatter during the backward)", many.Zero2S}, {"2 without the overlap (every bucket after the backward)", many.Zero2SyncS}} {
		fmt.Printf("| %s | %.3f | %.2f |\n", z.name, z.s, z.s/many.StepS)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "dp:", err)
	os.Exit(1)
}

// rank is one process of a run.
func rank(device string, reps int, bucketMB float64) error {
	c, err := mpi.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	cfgJSON := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256,
		"intermediate_size": 704, "num_hidden_layers": 4, "num_attention_heads": 4,
		"num_key_value_heads": 2, "vocab_size": 2048, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"max_position_embeddings": 32768, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(cfgJSON), "qwen2-4M")
	if err != nil {
		return err
	}
	log := io.Discard
	if c.Rank() == 0 {
		log = os.Stderr
	}
	dev, err := devsel.Pick(device, log)
	if err != nil {
		return err
	}
	if cuda.Kind(dev) != "cpu" {
		// model/comm/mpi all-reduces host memory; GPU gradients need the NCCL
		// communicator (cuda/nccl), which this benchmark does not open.
		return fmt.Errorf("device %s: the MPI communicator reduces host memory only", dev.Name())
	}
	m, err := model.New(cfg, dev, model.LMHeadOutput)
	if err != nil {
		return err
	}
	m.InitRandom(1)
	const seqs, seqLen = 8, 256
	lo, hi := c.Rank()*seqs/c.Size(), (c.Rank()+1)*seqs/c.Size()
	b := model.Batch{Seqs: []int32{0}}
	for s := lo; s < hi; s++ {
		for i := 0; i < seqLen; i++ {
			b.Tokens = append(b.Tokens, int32((s*7919+i*104729)%cfg.VocabSize))
		}
		b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
	}
	// d loss/d logprob of a token mean over the global batch.
	g := make([]float32, len(b.Tokens))
	for i := range g {
		g[i] = -1.0 / (seqs * seqLen)
	}
	dpc := dp.DefaultConfig()
	dpc.BucketMB = bucketMB
	par, err := dp.New(c, dpc)
	if err != nil {
		return err
	}
	opt, err := optim.New(m.Dev, m.Params, m.Grads, optim.DefaultConfig(), 100)
	if err != nil {
		return err
	}
	step := func() error {
		m.ZeroGrads()
		if _, err := m.Forward(b, true); err != nil {
			return err
		}
		if err := m.Backward(g, nil, nil); err != nil {
			return err
		}
		_, err := par.Step(m, opt)
		return err
	}
	r := result{Ranks: c.Size(), Threads: runtime.GOMAXPROCS(0), Params: m.NumParams()}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.Load = strings.Fields(string(raw))[0]
	}
	if r.StepS, err = best(c, reps, step); err != nil {
		return err
	}
	if c.Size() > 1 {
		if r.AllReduceS, err = best(c, reps, func() error { return par.AllReduce(m.Grads) }); err != nil {
			return err
		}
		if r.PlainS, err = best(c, reps, func() error { return c.AllReduce(m.Grads) }); err != nil {
			return err
		}
		bus := func(s float64) float64 {
			n := float64(c.Size())
			return 4 * float64(m.NumParams()) / s * 2 * (n - 1) / n / 1e9
		}
		r.BusGBs, r.PlainGBs = bus(r.AllReduceS), bus(r.PlainS)
		for _, z := range []struct {
			stage   int
			overlap bool
			dst     *float64
		}{{1, false, &r.Zero1S}, {2, true, &r.Zero2S}, {2, false, &r.Zero2SyncS}} {
			zc := dpc
			zc.Zero = z.stage
			zdp, err := dp.New(c, zc)
			if err != nil {
				return err
			}
			zm, err := model.New(cfg, dev, model.LMHeadOutput)
			if err != nil {
				return err
			}
			zm.InitRandom(1)
			zopt, err := zdp.NewOptimizer(zm.Dev, zm.Params, zm.Grads, optim.DefaultConfig(), 100)
			if err != nil {
				return err
			}
			if *z.dst, err = best(c, reps, func() error {
				if z.overlap {
					zdp.ZeroGrads(zm, zopt) // ZeRO-2: the backward sends its buckets
				} else {
					zm.ZeroGrads()
				}
				if _, err := zm.Forward(b, true); err != nil {
					return err
				}
				if err := zm.Backward(g, nil, nil); err != nil {
					return err
				}
				_, err := zdp.Step(zm, zopt)
				return err
			}); err != nil {
				return err
			}
		}
	}
	if c.Rank() == 0 {
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	}
	return nil
}

// best runs f once to warm up, then reps times between barriers, and
// returns the fastest repetition (its time averaged over the ranks; the
// collectives inside a step keep the ranks within a few ms of each other).
func best(c model.Comm, reps int, f func() error) (float64, error) {
	if err := f(); err != nil {
		return 0, err
	}
	b := math.Inf(1)
	for i := 0; i < reps; i++ {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		t := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		s, err := comm.SumFloat64s(c, []float64{time.Since(t).Seconds()})
		if err != nil {
			return 0, err
		}
		b = min(b, s[0]/float64(c.Size()))
	}
	return b, nil
}
