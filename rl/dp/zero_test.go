package dp

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/r1go/r1go/rl"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm/mpi"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/optim"
)

// allocCounter wraps a device and counts the bytes its buffers hold.
type allocCounter struct {
	model.Device
	bytes int64
}

func (c *allocCounter) Alloc(n int) model.Buffer {
	c.bytes += int64(n) * 4
	return c.Device.Alloc(n)
}

func (c *allocCounter) AllocAs(n int, kind model.StorageKind) (model.Buffer, bool) {
	b, ok := model.AllocAs(c.Device, n, kind)
	if ok && n > 0 {
		c.bytes += int64(n) * 2 // the CPU's kinds are bf16
	}
	return b, ok
}

// TestZeroOneUnderMPIRun starts TestZeroOneChild on two ranks: each builds
// a policy's optimizer with dp.zero1 off and on, counts what the CPU
// device allocated for each, and checks that the sharded step and the
// gathered checkpoint equal the unsharded ones bit for bit.
func TestZeroOneUnderMPIRun(t *testing.T) {
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		t.Skip("the child of this test")
	}
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi3; .ci/run does it)")
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "--oversubscribe", "--allow-run-as-root", "-np", "2",
		os.Args[0], "-test.run", "^TestZeroOneChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "R1GO_ZERO_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "zero1 child ok"); got != 2 {
		t.Fatalf("%d of 2 ranks reported success:\n%s", got, out)
	}
	for _, m := range regexp.MustCompile(`rank \d: optimizer .*`).FindAllString(string(out), -1) {
		t.Log(m)
	}
}

func TestZeroOneChild(t *testing.T) {
	dir := os.Getenv("R1GO_ZERO_CHILD")
	if dir == "" {
		t.Skip("run by TestZeroOneUnderMPIRun under mpirun")
	}
	c, err := mpi.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()
	dev := &allocCounter{Device: cpu.New()}
	cfg, err := model.ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 24, "intermediate_size": 40,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 97}`), "zero1 test config")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := model.New(cfg, dev, model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	policy.InitRandom(3)
	n := policy.Params.Len()
	oc := optim.DefaultConfig()
	oc.LR, oc.GradClip = 1e-3, 0.05 // the clip acts: the norm is global

	dc := DefaultConfig()
	dc.BucketMB = 4000.5 / (1 << 20) // 1000 values: several buckets and a padded last one
	plain, err := New(c, dc)
	if err != nil {
		t.Fatal(err)
	}
	before := dev.bytes
	full, err := plain.NewOptimizer(dev, policy.Params, policy.Grads, oc, 10)
	if err != nil {
		t.Fatal(err)
	}
	fullBytes := dev.bytes - before
	dc.Zero1 = true
	zdp, err := New(c, dc)
	if err != nil {
		t.Fatal(err)
	}
	// The sharded optimizer updates a copy of the weights.
	params := dev.Device.Alloc(n)
	dev.Copy(params, policy.Params)
	before = dev.bytes
	shard, err := zdp.NewOptimizer(dev, params, policy.Grads, oc, 10)
	if err != nil {
		t.Fatal(err)
	}
	zeroBytes := dev.bytes - before

	if fullBytes != 2*4*int64(n) {
		t.Fatalf("unsharded optimizer allocated %d bytes, want 2 moments × %d × 4", fullBytes, n)
	}
	l := optim.NewShardLayout(n, zdp.bucket(), size)
	b := l.Bucket
	_, own := l.Spans(rank)
	last := n % (size * b)
	pad := int64(0)
	if last%size != 0 {
		pad = int64(size * ((last + size - 1) / size))
	}
	if want := 4 * (2*int64(own) + int64(b) + pad); zeroBytes != want {
		t.Fatalf("rank %d: zero1 allocated %d bytes, want moments 2×%d + receive %d + pad %d values × 4 = %d",
			rank, zeroBytes, own, b, pad, want)
	}
	// The memory plan counts rank 0's share the same way.
	if pown, psc := plan.ZeroShard(n, zdp.bucket(), size); rank == 0 && zeroBytes != 4*(2*pown+psc) {
		t.Fatalf("zero1 allocated %d bytes on rank 0, the plan says 2×%d + %d values × 4", zeroBytes, pown, psc)
	}
	// Each rank holds at most one value per bucket more than 1/size.
	if own > n/size+len(zdp.zero[shard].spans) || int64(size)*zeroBytes > fullBytes+int64(size)*4*(int64(b)+pad+int64(size)) {
		t.Fatalf("rank %d: zero1 holds %d of %d values, %d bytes against %d unsharded", rank, own, n, zeroBytes, fullBytes)
	}
	fmt.Printf("rank %d: optimizer of %d parameters: unsharded %d B, zero1 %d B (moments %d, scratch %d)\n",
		rank, n, fullBytes, zeroBytes, 8*own, 4*(int64(b)+pad))

	// Two steps. Rank r's gradients are g_i·(r+1); the unsharded
	// optimizer steps on their sum, computed here in the same order as
	// MPI's two-rank sum.
	gh := make([]float32, n)
	for step := range 2 {
		sum := make([]float32, n)
		for i := range gh {
			g := float32(math.Sin(float64(i*7+step))) * 0.01
			gh[i] = g * float32(rank+1)
			sum[i] = g*1 + g*2
		}
		dev.Upload(policy.Grads, sum)
		want := full.Step(1)
		dev.Upload(policy.Grads, gh)
		got, err := zdp.Step(policy, shard)
		if err != nil {
			t.Fatal(err)
		}
		if got.LR != want.LR || math.Abs(got.GradNorm-want.GradNorm) > 1e-12*want.GradNorm || got.Skipped {
			t.Fatalf("step %d: zero1 %+v, unsharded %+v", step, got, want)
		}
		a, z := make([]float32, n), make([]float32, n)
		dev.Download(a, policy.Params)
		dev.Download(z, params)
		for i := range a {
			if a[i] != z[i] {
				t.Fatalf("rank %d step %d: weight %d is %v sharded, %v unsharded", rank, step, i, z[i], a[i])
			}
		}
	}
	// The gathered checkpoint is the unsharded file, byte for byte, and a
	// shard loaded from it holds its spans of the moments.
	tr := &rl.Trainer{Sync: zdp}
	zpath, fpath := filepath.Join(dir, "zero.safetensors"), filepath.Join(dir, "full.safetensors")
	if err := tr.SaveOptimizer(shard, zpath); err != nil {
		t.Fatal(err)
	}
	if rank == 0 {
		if err := full.Save(fpath); err != nil {
			t.Fatal(err)
		}
		zb, _ := os.ReadFile(zpath)
		fb, _ := os.ReadFile(fpath)
		if len(zb) == 0 || !bytes.Equal(zb, fb) {
			t.Fatalf("the gathered zero1 file (%d bytes) differs from the unsharded one (%d bytes)", len(zb), len(fb))
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	again, err := zdp.NewOptimizer(dev, params, policy.Grads, oc, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.LoadOptimizer(again, zpath); err != nil {
		t.Fatal(err)
	}
	if a, b := again.Shard(), shard.Shard(); again.Steps() != 2 || !bytes.Equal(a.M, b.M) || !bytes.Equal(a.V, b.V) {
		t.Fatalf("rank %d: the reloaded shard differs (step %d)", rank, again.Steps())
	}
	fmt.Printf("zero1 child ok (rank %d)\n", rank)
}
