package rl

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

// countingSource hands out batches of size questions numbered from 0,
// "b<batch>-<prompt>"; its state is the number of batches handed out.
type countingSource struct{ size, next int }

func (s *countingSource) Next() []data.Sample {
	var out []data.Sample
	for i := 0; i < s.size; i++ {
		out = append(out, data.Sample{ID: fmt.Sprintf("b%d-%d", s.next, i), Question: "what is alpha?", Answers: []string{"gamma"}})
	}
	s.next++
	return out
}

func (s *countingSource) State() data.SamplerState { return data.SamplerState{Batches: int64(s.next)} }

// slowTool answers after a delay chosen by the hash of the call's number:
// 0 to 14 ms, and one call in five 60 ms more, so that groups finish out of
// order and some outlast several steps.
type slowTool struct {
	echoTool
	calls *atomic.Int64
}

func (s slowTool) Call(ctx context.Context, args json.RawMessage) (env.Result, error) {
	h := fnv.New32a()
	fmt.Fprint(h, s.calls.Add(1))
	d := time.Duration(h.Sum32()%15) * time.Millisecond
	if h.Sum32()%5 == 0 {
		d += 60 * time.Millisecond
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return env.Result{}, ctx.Err()
	}
	return s.echoTool.Call(ctx, args)
}

// TestAsyncStalenessBound drives the asynchronous rollout as a trainer
// would (take the batch of version v, "update", refresh to v+1) over a
// scripted policy and a tool of uneven latency, with a checkpoint and a
// restart half way, for K = 0, 1 and 2. It checks the contract of
// rollout.max_staleness: no trained token was sampled more than K
// versions before the step that trains it, and none after it; every group
// is trained once, across the restart too (groups in flight at the
// checkpoint are regenerated); with K = 0 step v trains exactly batch v
// in order; and with K > 0 some trajectories span a refresh (partial
// rollouts) while the ages reach K.
func TestAsyncStalenessBound(t *testing.T) {
	f := newRolloutFixture(t)
	for _, k := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			const steps, restartAt, perStep = 10, 5, 3
			cfg := testRolloutConfig()
			cfg.N, cfg.MaxStaleness = 2, k
			src := &countingSource{size: perStep}
			start := func(version int, st *AsyncState) *AsyncRollout {
				p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 8, maxLen: 4096, tok: f.tok, state: make([]slotState, 8),
					scripts: map[string][][]int32{"alpha": {f.enc(callAlpha), f.enc(callBeta), f.enc(answer)}}}
				r := f.rollout(t, cfg, env.DefaultConfig(), p, slowTool{calls: new(atomic.Int64)})
				return startAsyncRollout(context.Background(), r, nil, version, k, perStep, src, st)
			}
			a := start(0, nil)
			trained := map[string]int{}
			var partial, maxAge float64
			for v := 0; v < steps; v++ {
				if v == restartAt {
					st := a.State()
					a.Close()
					src.next = int(st.Sampler.Batches) // the sampler restored
					a = start(v, &st)
				}
				trajs, m, err := a.Take(context.Background(), v)
				if err != nil {
					t.Fatal(err)
				}
				if len(trajs) < perStep*cfg.N && v < steps-1 {
					t.Fatalf("step %d trained %d trajectories, want at least %d", v, len(trajs), perStep*cfg.N)
				}
				var ids []string
				for i, tr := range trajs {
					if tr.Group != i/cfg.N || len(tr.Versions) == 0 {
						t.Fatalf("step %d trajectory %d: group %d, %d versions", v, i, tr.Group, len(tr.Versions))
					}
					for _, ver := range tr.Versions {
						if age := v - int(ver); age < 0 || age > k {
							t.Fatalf("step %d: a token of %s sampled at version %d (age %d, bound %d)", v, tr.Sample.ID, ver, age, k)
						}
					}
					if i%cfg.N == 0 {
						ids = append(ids, tr.Sample.ID)
						trained[tr.Sample.ID]++
					}
				}
				if k == 0 {
					want := src.batchIDs(v)
					if !slices.Equal(ids, want) {
						t.Fatalf("K=0 step %d trained %v, want batch %d %v", v, ids, v, want)
					}
				}
				partial += m["async/partial"]
				maxAge = max(maxAge, m["async/age_max"])
				time.Sleep(3 * time.Millisecond) // the update
				if err := a.Refresh(nil, v+1); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
			for id, n := range trained {
				if n != 1 {
					t.Errorf("group %s trained %d times", id, n)
				}
			}
			// Every group of the batches the first steps must have covered.
			for b := 0; b < steps-k; b++ {
				for _, id := range src.batchIDs(b) {
					if trained[id] == 0 && b < steps-1-k {
						t.Errorf("group %s of batch %d never trained", id, b)
					}
				}
			}
			t.Logf("K=%d: %d groups trained, max age %v, partial share summed over steps %.2f", k, len(trained), maxAge, partial)
			if k > 0 && (partial == 0 || maxAge == 0) {
				t.Errorf("K=%d: no trajectory spanned a refresh (partial %v) or no token was older than its step (max age %v)", k, partial, maxAge)
			}
			if k == 0 && (partial != 0 || maxAge != 0) {
				t.Errorf("K=0: partial %v, max age %v, want 0", partial, maxAge)
			}
		})
	}
}

func (s *countingSource) batchIDs(b int) []string {
	var ids []string
	for i := 0; i < s.size; i++ {
		ids = append(ids, fmt.Sprintf("b%d-%d", b, i))
	}
	return ids
}
