package dp

import (
	"reflect"
	"strings"
	"testing"

	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/rl"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// TestDPOneRank: over the single-process Comm the data-parallel step is
// the identity: the whole batch, the same packed batch back, the same
// metrics.
func TestDPOneRank(t *testing.T) {
	d, err := New(comm.Single{Dev: cpu.New()}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	prompts := make([]data.Sample, 3)
	sl := d.Shard(prompts, 2)
	if sl != rl.Whole(3, 2) || sl != (rl.Local{}).Shard(prompts, 2) {
		t.Fatalf("shard of 3 prompts of 2: %+v", sl)
	}
	b := &rl.Batch{Offsets: []int{0, 2, 5, 6, 8, 9, 11}, PromptLen: []int{1, 1, 1, 1, 1, 1}, Group: []int{0, 0, 1, 1, 2, 2},
		Tokens: make([]int32, 11), ActionMask: make([]bool, 11), Scores: make([]float64, 11)}
	b.AdvantageMask = b.ActionMask
	for i := range b.Scores {
		b.Scores[i] = float64(i) / 3
		b.ActionMask[i] = i%2 == 0
		b.Tokens[i] = int32(i)
	}
	g, gs, err := d.GatherBatch(b, sl)
	if err != nil {
		t.Fatal(err)
	}
	if gs != sl {
		t.Errorf("one rank's slice %+v came back %+v", sl, gs)
	}
	for _, f := range []string{"Offsets", "PromptLen", "Group", "Tokens", "ActionMask", "AdvantageMask", "Scores"} {
		if !reflect.DeepEqual(reflect.ValueOf(g).Elem().FieldByName(f).Interface(), reflect.ValueOf(b).Elem().FieldByName(f).Interface()) {
			t.Errorf("gathered %s differs", f)
		}
	}
	if g.Rewards != nil || g.OldLogProb != nil {
		t.Error("absent fields came back")
	}
	if own := sl.Own(g.Slice(2, 6), 2, 6); own.NumSeqs() != 4 {
		t.Errorf("one rank owns %d of a 4-sequence mini-batch", own.NumSeqs())
	}
	m := rl.Metrics{"actor/pg_loss": 0.5, "actor/pg_clipfrac": 0.25}
	got, err := d.ReduceMetrics(m, 2)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("metrics %v -> %v, %v", m, got, err)
	}
}

// TestDPOwnTwoRanks: rank 1 of 2 owns the second half of the global
// batch and its part of each mini-batch.
func TestDPOwnTwoRanks(t *testing.T) {
	d := &DP{Comm: fakeRank{rank: 1, size: 2}}
	sl := d.Shard(make([]data.Sample, 4), 2)
	if sl != (rl.Slice{PromptLo: 2, PromptHi: 4, SeqLo: 4, SeqHi: 8, Global: 8}) {
		t.Fatalf("rank 1 of 2: %+v", sl)
	}
	b := &rl.Batch{Offsets: []int{0, 1, 2, 3, 4, 5, 6, 7, 8}}
	for _, c := range []struct{ lo, hi, want int }{{0, 4, 0}, {0, 8, 4}, {2, 6, 2}, {4, 8, 4}, {6, 8, 2}} {
		if got := sl.Own(b.Slice(c.lo, c.hi), c.lo, c.hi).NumSeqs(); got != c.want {
			t.Errorf("mini-batch [%d,%d): rank 1 owns %d sequences, want %d", c.lo, c.hi, got, c.want)
		}
	}
}

// fakeRank is a Comm that only knows its rank: enough for Shard.
type fakeRank struct {
	model.Comm
	rank, size int
}

func (f fakeRank) Rank() int { return f.rank }
func (f fakeRank) Size() int { return f.size }

// TestShardMastersNeedsZeRO: dp.shard_masters without a ZeRO stage is
// refused by name, and on a device that cannot page (the CPU device)
// ShardMasters says what it needs.
func TestShardMastersNeedsZeRO(t *testing.T) {
	c := DefaultConfig()
	c.ShardMasters = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "dp.shard_masters needs dp.zero") {
		t.Fatalf("dp.shard_masters at stage 0: %v", err)
	}
	c.Zero = 1
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig([]byte(`{"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32}`), "shard masters test")
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New()
	m, err := model.New(cfg, dev, model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(comm.Single{Dev: dev}, c)
	if err != nil {
		t.Fatal(err)
	}
	o, err := d.NewOptimizer(dev, m.Params, m.Grads, optim.DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ShardMasters(m, o); err == nil || !strings.Contains(err.Error(), "cannot give memory back") {
		t.Fatalf("ShardMasters on the CPU device: %v", err)
	}
}
