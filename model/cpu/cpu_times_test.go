package cpu

import (
	"testing"
	"time"

	"github.com/r1go/r1go/model"
)

// TestTimeOps: with TimeOps on, decode steps on the CPU device count each
// step's draws as "sampling", the layers' and the LM head's products,
// attention and norms per call, and the token embedding and the gather of
// the rows whose logits the step wants as "embedding"; the times add up
// to no more than the steps' wall time; once off, nothing more is counted.
func TestTimeOps(t *testing.T) {
	cfg := tinyConfig(t, true)
	m, err := model.New(cfg, New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(5)
	c := m.NewKVCache(2, 16)
	chunks := []model.Chunk{{Slot: 0, Tokens: []int32{1, 2}}, {Slot: 1, Tokens: []int32{3}}}
	s := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	ops := TimeOps(m.Dev, true)
	const steps = 3
	t0 := time.Now()
	for step := range steps {
		out, err := m.StepSample(c, chunks, s, []uint64{uint64(step), 9}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range chunks {
			chunks[j].Tokens = []int32{out.Tokens[j]}
		}
	}
	wall := time.Since(t0)
	TimeOps(m.Dev, false)
	L := int64(cfg.NumHiddenLayers)
	want := map[string]int64{
		"embedding": steps * 2,
		"sampling":  steps,
		"attention": steps * L,
		"products":  steps * (L*4 + 1), // q|k|v, o, gate|up, down; the head
		"norm":      steps * (2*L + 1),
	}
	var sum time.Duration
	got := map[string]int64{}
	for _, op := range ops.Split() {
		got[op.Op] = op.Calls
		sum += op.Time
		if op.Time <= 0 || op.Wait < 0 || op.Wait > op.Time {
			t.Errorf("%s: %d calls in %v, %v of it waiting at loops' ends", op.Op, op.Calls, op.Time, op.Wait)
		}
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d calls, want %d (all: %v)", op, got[op], n, got)
		}
	}
	if sum > wall {
		t.Errorf("timed operations add up to %v, more than the %v the steps took", sum, wall)
	}
	jw := ops.JoinWait()
	if jw < 0 || jw > wall {
		t.Errorf("the loops' callers waited %v at their ends, in steps of %v", jw, wall)
	}
	if _, err := m.StepSample(c, chunks, s, []uint64{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if n := ops.Split()[0].Calls; got[ops.Split()[0].Op] != n {
		t.Errorf("a step after TimeOps(dev, false) was counted")
	}
	if ops.JoinWait() != jw {
		t.Errorf("the join waits went from %v to %v after TimeOps(dev, false)", jw, ops.JoinWait())
	}
	if TimeOps(nil, true) != nil {
		t.Error("TimeOps on a device that does not time returned an OpTimes")
	}
}
