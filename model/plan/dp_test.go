package plan

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
)

// TestPlanZeroOne plans Qwen2.5-7B's GRPO step per rank of 8 with and
// without dp.zero1: only the optimizer state and the data-parallel scratch
// change, the state to rank 0's shard (1/8 of the moments, plus at most
// one value per bucket), and the plan line says so.
func TestPlanZeroOne(t *testing.T) {
	cfg, err := model.LoadConfig(filepath.Join("..", "testdata", "config_qwen2.5-7b.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Device: "cuda", Capacity: 80e9, Precision: "bf16-mixed", Train: true, Reference: true, Critic: true,
		MicroBatchTokens: 4096, RolloutSlots: 20, MaxContext: 4096, MaxPromptTokens: 512, GroupSize: 5, Ranks: 8}
	z := s
	z.Zero1 = true
	off, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	on, err := New(cfg, z)
	if err != nil {
		t.Fatal(err)
	}
	item := func(p *Plan, name string) Item {
		for _, it := range p.Items {
			if it.Name == name {
				return it
			}
		}
		t.Fatalf("the plan has no %q line", name)
		return Item{}
	}
	P := shapeOf(cfg).arena(true, false)
	bucket := 25 << 20 / 4
	own, scratch := ZeroShard(int(P), bucket, 8)
	buckets := (P + 8*int64(bucket) - 1) / (8 * int64(bucket))
	if own < (P+7)/8 || own > P/8+buckets {
		t.Fatalf("rank 0 owns %d of %d values over %d buckets", own, P, buckets)
	}
	if got := item(off, "optimizer state").Bytes; got != 2*P*4 {
		t.Fatalf("unsharded optimizer state %d, want %d", got, 2*P*4)
	}
	if got := item(on, "optimizer state"); got.Bytes != 2*own*4 || !strings.Contains(got.Detail, "ZeRO-1 shard") {
		t.Fatalf("zero1 optimizer state %+v, want %d bytes", got, 2*own*4)
	}
	C := shapeOf(cfg).arena(false, true)
	cown, cscratch := ZeroShard(int(C), bucket, 8)
	if d := item(off, "critic").Bytes - item(on, "critic").Bytes; d != 2*(C-cown)*4 {
		t.Fatalf("zero1 saves %d bytes of the critic, want its moments' 7/8: %d", d, 2*(C-cown)*4)
	}
	if got := item(on, "data-parallel scratch").Bytes; got != 4*(scratch+cscratch) || got == 0 {
		t.Fatalf("zero1 scratch %d, want %d", got, 4*(scratch+cscratch))
	}
	if got := item(off, "data-parallel scratch"); got.Bytes != 0 || !strings.Contains(got.Detail, "in place") {
		t.Fatalf("all-reduce scratch %+v", got)
	}
	for i, it := range off.Items {
		if n := it.Name; n != "optimizer state" && n != "critic" && n != "data-parallel scratch" && n != "master weights" && on.Items[i] != it {
			t.Fatalf("zero1 changed %q: %+v → %+v", n, it, on.Items[i])
		}
	}
	// Without dp.shard_masters the CUDA device keeps its whole master
	// arena: the bytes stay, the line says what would give it back.
	if a, b := item(off, "master weights"), item(on, "master weights"); a.Bytes != b.Bytes || !strings.Contains(b.Detail, "dp.shard_masters") {
		t.Fatalf("zero1 master weights on the CUDA device: %+v → %+v", a, b)
	}
	var b strings.Builder
	on.Print(&b)
	if !strings.Contains(b.String(), "per rank of 8 with ZeRO-1") {
		t.Fatalf("the plan does not say it is ZeRO-1's:\n%s", b.String())
	}
	// One process: dp.zero1 changes nothing and no line is added.
	one, z1 := s, z
	one.Ranks, z1.Ranks = 1, 1
	a, _ := New(cfg, one)
	c, _ := New(cfg, z1)
	if !slices.Equal(a.Items, c.Items) || slices.ContainsFunc(a.Items, func(it Item) bool { return it.Name == "data-parallel scratch" }) {
		t.Fatalf("one process: zero1 changed the plan or added a data-parallel line")
	}
	// The advice offers dp.zero1 where it is enough: a capacity between
	// the two totals.
	s.Capacity = (off.Total() + on.Total()) / 2
	p, _ := New(cfg, s)
	if adv := p.Advice(cfg); !slices.Contains(adv, "dp.zero1=true") {
		t.Fatalf("advice %q lacks dp.zero1=true", adv)
	}
}

// TestZeroShardLayout: rank 0's share sums the first chunk of every bucket,
// and the padded last bucket is counted only when it does not divide.
func TestZeroShardLayout(t *testing.T) {
	for _, c := range []struct {
		n, b, ranks  int
		own, scratch int64
	}{
		{10, 3, 2, 5, 3},     // buckets of 6: chunks 3 and 2; 4 divides by 2
		{17, 4, 3, 6, 4 + 6}, // buckets of 12: chunks 4 and 2; 5 pads to 6
		{5, 8, 4, 2, 2 + 8},  // one bucket of 8 (b=2): chunk 2; 5 pads to 8
		{9, 8, 1, 9, 0},
	} {
		own, scratch := ZeroShard(c.n, c.b, c.ranks)
		if own != c.own || scratch != c.scratch {
			t.Errorf("ZeroShard(%d, %d, %d) = %d, %d; want %d, %d", c.n, c.b, c.ranks, own, scratch, c.own, c.scratch)
		}
	}
}

// TestPlanZeroTwo plans the same 7B step at ZeRO stage 2 with a device
// that gives arena memory back (CUDAPaging, and the CPU device's fp32
// gradients): the master weights and the gradients become rank 0's shard
// (plus, for the gradients, the arena's transient part: a vocabulary
// table, three buckets and the bucket edges), and the scratch holds a
// receive chunk per bucket in flight. Without paging the CUDA plan keeps
// the whole arenas and adds the shard.
func TestPlanZeroTwo(t *testing.T) {
	cfg, err := model.LoadConfig(filepath.Join("..", "testdata", "config_qwen2.5-7b.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Device: "cuda", Capacity: 80 << 30, Precision: "bf16-mixed", Train: true, Reference: true,
		MicroBatchTokens: 4096, RolloutSlots: 5, MaxContext: 4096, MaxPromptTokens: 512, GroupSize: 5, Ranks: 8, Zero: 2}
	item := func(p *Plan, name string) Item {
		for _, it := range p.Items {
			if it.Name == name {
				return it
			}
		}
		t.Fatalf("the plan has no %q line", name)
		return Item{}
	}
	sh := shapeOf(cfg)
	P := sh.arena(true, false)
	bucket := int64(25 << 20 / 4)
	own, _ := ZeroShard(int(P), int(bucket), 8)
	VC := int64(sh.V) * int64(sh.C)
	if sh.tied || sh.segment(true) != VC || sh.layer() >= VC {
		t.Fatalf("7B: untied %v, its vocabulary table (%d) is the largest run: segment %d, layer %d", !sh.tied, VC, sh.segment(true), sh.layer())
	}
	tr := ZeroTwoTransient(P, VC, bucket, 8)
	edges := (P+8*bucket-1)/(8*bucket) + 1
	if tr != VC+3*8*bucket+edges*1024 {
		t.Fatalf("transient %d", tr)
	}
	// On the CUDA device gradients are given back in 2 MiB VMM chunks: an
	// edge keeps a chunk, and the run being written is mapped in whole ones.
	trc := ZeroTwoTransientPaged(P, VC, bucket, 8, CUDAChunk)
	if 8*bucket%CUDAChunk != 0 || trc != VC+2*CUDAChunk+(3+CUDAPending)*8*bucket+2*CUDAChunk {
		t.Fatalf("transient in chunks %d", trc)
	}
	paged := s
	paged.CUDAPaging = true
	p, err := New(cfg, paged)
	if err != nil {
		t.Fatal(err)
	}
	if got := item(p, "gradients"); got.Bytes != 4*(own+trc) || !strings.Contains(got.Detail, "ZeRO-2") {
		t.Fatalf("ZeRO-2 gradients %+v, want 4×(%d+%d)", got, own, trc)
	}
	// Sharded masters keep the shard, the norm weights and biases (3 runs
	// a layer: the input norm, the q/k/v biases, the post-attention norm;
	// and the final norm), each in whole chunks, and a bucket of scratch.
	kept := int64(28*(2*3584+3584+2*512)+3584) + int64(3*28+1)*2*CUDAChunk
	if got := item(p, "master weights"); got.Bytes != 4*(own+kept+8*bucket) {
		t.Fatalf("ZeRO-2 master weights %+v, want 4×(%d+%d+%d)", got, own, kept, 8*bucket)
	}
	if got := item(p, "data-parallel scratch"); got.Bytes != 4*ZeroTwoScratch(int(P), int(bucket), 8) || got.Bytes != 4*(2*bucket) {
		t.Fatalf("ZeRO-2 scratch %+v", got)
	}
	var b strings.Builder
	p.Print(&b)
	t.Logf("\n%s", b.String())
	if !strings.Contains(b.String(), "with ZeRO-2") {
		t.Fatalf("the plan does not say it is ZeRO-2's:\n%s", b.String())
	}
	// As the CUDA device is: its gradients given back through VMM, its
	// master weights whole.
	q, _ := New(cfg, s)
	if got := item(q, "gradients"); got.Bytes != 4*(own+trc) || !strings.Contains(got.Detail, "VMM") {
		t.Fatalf("ZeRO-2 gradients with VMM %+v", got)
	}
	if got := item(q, "master weights"); got.Bytes != 4*P || !strings.Contains(got.Detail, "dp.shard_masters") {
		t.Fatalf("ZeRO-2 master weights without dp.shard_masters %+v", got)
	}
	// Between the two, the advice names dp.shard_masters.
	mid := s
	mid.Capacity = (q.Total() + p.Total()) / 2
	qm, _ := New(cfg, mid)
	if adv := qm.Advice(cfg); qm.Fits() || !slices.Contains(adv, "dp.shard_masters=true") {
		t.Fatalf("advice %q lacks dp.shard_masters=true (%.2f GiB without, %.2f with)", adv, float64(q.Total())/GiB, float64(p.Total())/GiB)
	}
	// A CUDA device without VMM: whole arenas, and the gradient shard beside.
	nv := s
	nv.CUDANoVMM = true
	q, _ = New(cfg, nv)
	if got := item(q, "gradients"); got.Bytes != 4*(P+own) || !strings.Contains(got.Detail, "no virtual memory management") {
		t.Fatalf("ZeRO-2 gradients without VMM %+v", got)
	}
	// The advice offers dp.zero=2 where stage 1 is not enough and stage 2 is.
	one := paged
	one.Zero = 1
	p1, _ := New(cfg, one)
	one.Capacity = (p1.Total() + p.Total()) / 2
	p1, _ = New(cfg, one)
	if adv := p1.Advice(cfg); !slices.Contains(adv, "dp.zero=2") {
		t.Fatalf("advice %q lacks dp.zero=2 (stage 1 needs %.2f GiB, stage 2 %.2f)", adv, float64(p1.Total())/GiB, float64(p.Total())/GiB)
	}
	// dp.zero1 is stage 1 unless dp.zero says more.
	for _, c := range []struct {
		zero  int
		zero1 bool
		ranks int
		want  int
	}{{0, true, 8, 1}, {2, true, 8, 2}, {1, false, 8, 1}, {2, false, 1, 0}, {0, false, 8, 0}} {
		if got := (Settings{Zero: c.zero, Zero1: c.zero1, Ranks: c.ranks}).stage(); got != c.want {
			t.Errorf("zero %d zero1 %v ranks %d: stage %d, want %d", c.zero, c.zero1, c.ranks, got, c.want)
		}
	}
}
