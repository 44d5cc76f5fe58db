package dp

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm/mpi"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/optim"
)

// TestZeroTwoUnderMPIRun starts TestZeroTwoChild on two ranks: each trains
// two copies of a policy from the same weights, one with ZeRO-1 and one
// with ZeRO-2, on its own micro-batches, and checks that the steps agree,
// that ZeRO-2's buckets went out while the backward was running, and that
// the gradient memory it held was its shard and the plan's transient part.
func TestZeroTwoUnderMPIRun(t *testing.T) {
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		t.Skip("the child of this test")
	}
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi3; .ci/run does it)")
	}
	cmd := exec.Command(bin, "--oversubscribe", "--allow-run-as-root", "-np", "2",
		os.Args[0], "-test.run", "^TestZeroTwoChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "R1GO_ZERO2_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "zero2 child ok"); got != 2 {
		t.Fatalf("%d of 2 ranks reported success:\n%s", got, out)
	}
	for _, m := range regexp.MustCompile(`rank \d: .*`).FindAllString(string(out), -1) {
		t.Log(m)
	}
}

func TestZeroTwoChild(t *testing.T) {
	if os.Getenv("R1GO_ZERO2_CHILD") == "" {
		t.Skip("run by TestZeroTwoUnderMPIRun under mpirun")
	}
	c, err := mpi.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()
	dev := cpu.New()
	// Untied, 8 layers: the vocabulary table (96·64) is smaller than a
	// layer, so the backward writes one layer between two sends.
	cfg, err := model.ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256,
		"num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
		"tie_word_embeddings": false}`), "zero2 test config")
	if err != nil {
		t.Fatal(err)
	}
	oc := optim.DefaultConfig()
	oc.LR, oc.GradClip = 1e-3, 0.05 // the clip acts: the norm is global

	// Rank r's micro-batches: nMicro packed batches of two sequences.
	batch := func(step, j int) (model.Batch, []float32) {
		var b model.Batch
		b.Seqs = []int32{0}
		for s := range 2 {
			n := 9 + (rank*5+j*3+s)%7
			for i := range n {
				b.Tokens = append(b.Tokens, int32((i*13+rank*31+j*7+step*5+s)%96))
			}
			b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
		}
		g := make([]float32, len(b.Tokens))
		for i := range g {
			g[i] = float32(math.Sin(float64(i+rank*17+j*3+step))) * 0.1
		}
		return b, g
	}
	for _, nMicro := range []int{1, 3} {
		bucketMB := 8000.5 / (1 << 20) // 2000 values: buckets of 4000, a padded last one
		mk := func(stage int, comm model.Comm) (*model.Model, *DP, *optim.AdamW) {
			m, err := model.New(cfg, dev, model.LMHeadOutput)
			if err != nil {
				t.Fatal(err)
			}
			m.InitRandom(3)
			dc := DefaultConfig()
			dc.BucketMB, dc.Zero = bucketMB, stage
			d, err := New(comm, dc)
			if err != nil {
				t.Fatal(err)
			}
			d.MeasureGrads = true
			o, err := d.NewOptimizer(dev, m.Params, m.Grads, oc, 10)
			if err != nil {
				t.Fatal(err)
			}
			return m, d, o
		}
		m1, d1, o1 := mk(1, c)
		m2, d2, o2 := mk(2, c)
		ac := &queuedComm{Comm: c}
		m3, d3, o3 := mk(2, ac) // the AsyncComm path (NCCL's, on its second stream)
		n := m1.Params.Len()
		for step := range 2 {
			for k, d := range []*DP{d1, d2, d3} {
				m, o := []*model.Model{m1, m2, m3}[k], []*optim.AdamW{o1, o2, o3}[k]
				d.ZeroGrads(m, o)
				// Rank 1 runs one micro-batch fewer: ZeRO-2's ranks agree
				// on the rounds, and rank 1 sends a round of zeros.
				mine := nMicro - rank%2*min(1, nMicro-1)
				idle, err := d.IdleRounds(m, o, mine)
				if err != nil {
					t.Fatal(err)
				}
				for j := range mine {
					b, g := batch(step, j)
					if _, err := m.Forward(b, true); err != nil {
						t.Fatal(err)
					}
					if err := m.Backward(g, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				d.Idle(o, idle)
				res, err := d.Step(m, o)
				if err != nil || res.Skipped {
					t.Fatalf("stage %d step %d: %+v %v", k+1, step, res, err)
				}
			}
			a, z, q := make([]float32, n), make([]float32, n), make([]float32, n)
			dev.Download(a, m1.Params)
			dev.Download(z, m2.Params)
			dev.Download(q, m3.Params)
			for i := range z {
				if z[i] != q[i] {
					t.Fatalf("rank %d step %d: weight %d is %v through the goroutine, %v through AsyncComm", rank, step, i, z[i], q[i])
				}
			}
			d, exact := 0.0, true
			for i := range a {
				d = max(d, math.Abs(float64(a[i]-z[i])))
				exact = exact && a[i] == z[i]
			}
			// One micro-batch: the same sums in the same order, bit for bit.
			// Three: Σ_j reduce(g_j) against reduce(Σ_j g_j), float32 sums
			// reassociated; AdamW's first steps move each weight by about lr
			// whatever the gradient's size, so a few ulps of gradient move
			// the weights by far less than lr·1e-3.
			if nMicro == 1 && !exact || d > 1e-6 {
				t.Fatalf("rank %d, %d micro-batches, step %d: ZeRO-2 weights differ from ZeRO-1's by %.3g (bit-exact %v)", rank, nMicro, step, d, exact)
			}
			fmt.Printf("rank %d: %d micro-batches, step %d: max |ZeRO-2 − ZeRO-1| %.3g (bit-exact %v)\n", rank, nMicro, step, d, exact)
		}
		if l3, o3n, _, _ := d3.ZeroTwoStats(o3); ac.queued != l3 || o3n == 0 {
			t.Fatalf("rank %d: AsyncComm queued %d reduce-scatters, ZeRO-2 sent %d buckets (%d during the backward)", rank, ac.queued, l3, o3n)
		}
		launched, overlapped, peak, ok := d2.ZeroTwoStats(o2)
		z := d2.zero[o2]
		nb := len(z.two.bkts)
		rounds := 2 * nMicro // every rank sends as many rounds as the busiest
		if !ok || launched != rounds*nb {
			t.Fatalf("rank %d: %d buckets sent, want %d rounds × %d", rank, launched, rounds, nb)
		}
		// Every bucket but those below layer 0 (the embedding table) goes
		// out before the backward's last callback, while layers remain;
		// a round of zeros (rank 1's missing micro-batch) has no backward.
		idle := 2 * (rank % 2) * min(1, nMicro-1)
		if overlapped == 0 || launched-overlapped > (rounds-idle)*(1+cfg.VocabSize*cfg.HiddenSize/(size*z.b)+1)+idle*nb {
			t.Fatalf("rank %d: only %d of %d buckets were sent while the backward ran", rank, overlapped, launched)
		}
		// Memory: the packed shard is the plan's; the arena never held
		// more than the plan's transient part, and holds nothing now.
		own, _ := plan.ZeroShard(n, z.b, size)
		if rank == 0 && int64(z.two.shard.Len()) != own {
			t.Fatalf("rank 0's gradient shard holds %d values, the plan %d", z.two.shard.Len(), own)
		}
		mc := m2.Config
		layer := int64(n-2*cfg.VocabSize*cfg.HiddenSize-cfg.HiddenSize) / int64(mc.NumHiddenLayers)
		tr := plan.ZeroTwoTransient(int64(n), max(layer, int64(cfg.VocabSize*cfg.HiddenSize)), int64(z.b), size)
		now, _ := model.GradsResident(m2.Dev, m2.Grads)
		if peak < 0 || peak > 4*tr || now > int64(4096*(nb+1)) {
			t.Fatalf("rank %d: the gradient arena (%d B) held at most %d B resident, the plan allows %d B; %d B after the step", rank, 4*n, peak, 4*tr, now)
		}
		fmt.Printf("rank %d: %d micro-batches: %d buckets sent, %d while the backward ran; gradient arena %d B, resident at most %d B (plan: %d B) beside a %d B shard, %d B after the step\n",
			rank, nMicro, launched, overlapped, 4*n, peak, 4*tr, 4*z.two.shard.Len(), now)
	}
	fmt.Printf("zero2 child ok (rank %d)\n", rank)
}

// queuedComm is a model.AsyncComm over MPI: its reduce-scatters run in
// order on a goroutine of its own, as NCCL's run on its second stream.
type queuedComm struct {
	model.Comm
	queued int
	jobs   chan func()
}

func (q *queuedComm) ReduceScatterAsync(dst, src model.Buffer) (func() error, error) {
	if q.jobs == nil {
		q.jobs = make(chan func(), 16)
		go func() {
			for f := range q.jobs {
				f()
			}
		}()
	}
	q.queued++
	done := make(chan error, 1)
	q.jobs <- func() { done <- q.Comm.ReduceScatter(dst, src) }
	return func() error { return <-done }, nil
}
