package dp

import (
	"slices"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// hostGroup is an in-process group of ranks with only the host control
// plane (GatherBytes), which GatherBatch uses.
type hostGroup struct {
	mu    sync.Mutex
	cond  *sync.Cond
	parts [][]byte
	n     int
	round int
	out   []byte
}

type hostRank struct {
	model.Comm
	rank int
	g    *hostGroup
}

func (c hostRank) Rank() int { return c.rank }
func (c hostRank) Size() int { return len(c.g.parts) }
func (c hostRank) GatherBytes(src []byte) ([]byte, error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.parts[c.rank] = append([]byte(nil), src...)
	if g.n++; g.n == len(g.parts) {
		g.out = slices.Concat(g.parts...)
		g.n, g.round = 0, g.round+1
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	return g.out, nil
}

// gatherOnRanks runs GatherBatch on len(parts) in-process ranks, rank r
// gathering parts[r] with slice shards[r].
func gatherOnRanks(t *testing.T, parts []*rl.Batch, shards []rl.Slice) ([]*rl.Batch, []rl.Slice) {
	t.Helper()
	g := &hostGroup{parts: make([][]byte, len(parts))}
	g.cond = sync.NewCond(&g.mu)
	out, slices := make([]*rl.Batch, len(parts)), make([]rl.Slice, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for r := range parts {
		wg.Go(func() {
			d := &DP{Comm: hostRank{rank: r, g: g}}
			out[r], slices[r], errs[r] = d.GatherBatch(parts[r], shards[r])
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out, slices
}

// seqBatch is a batch of one-token sequences with the given groups and,
// when traj is not nil, step mode's trajectory ids.
func seqBatch(group, traj []int, truncated []bool) *rl.Batch {
	b := &rl.Batch{Offsets: []int{0}, Group: group, Traj: traj, Truncated: truncated}
	for i := range group {
		b.Offsets = append(b.Offsets, i+1)
		b.Tokens = append(b.Tokens, int32(i))
		b.ActionMask = append(b.ActionMask, true)
	}
	return b
}

// TestGatherBatchDropsAndSteps: two ranks, each sharded 2 prompts of 2
// samples. Whole mode with a trajectory dropped on rank 0: the global
// batch holds 7, rank 1's sequences start at 3. Step mode: rank 0 packs
// 4 trajectories as 6 sequences, rank 1 4 as 5; trajectory ids run on
// across the ranks and Truncated travels with its sequences.
func TestGatherBatchDropsAndSteps(t *testing.T) {
	shards := []rl.Slice{{PromptLo: 0, PromptHi: 2, SeqLo: 0, SeqHi: 4, Global: 8}, {PromptLo: 2, PromptHi: 4, SeqLo: 4, SeqHi: 8, Global: 8}}
	whole := []*rl.Batch{seqBatch([]int{0, 1, 1}, nil, nil), seqBatch([]int{0, 0, 1, 1}, nil, nil)}
	gs, ss := gatherOnRanks(t, whole, shards)
	if want := []int{0, 1, 1, 2, 2, 3, 3}; !slices.Equal(gs[1].Group, want) || gs[1].Traj != nil {
		t.Errorf("whole mode: groups %v (want %v), Traj %v", gs[1].Group, want, gs[1].Traj)
	}
	if ss[0].SeqLo != 0 || ss[0].SeqHi != 3 || ss[1].SeqLo != 3 || ss[1].SeqHi != 7 || ss[0].Global != 7 || ss[1].Global != 7 {
		t.Errorf("whole mode with a drop: slices %+v, %+v", ss[0], ss[1])
	}
	step := []*rl.Batch{
		seqBatch([]int{0, 0, 0, 1, 1, 1}, []int{0, 0, 1, 2, 3, 3}, []bool{false, false, true, false, true, true}),
		seqBatch([]int{0, 0, 1, 1, 1}, []int{0, 1, 2, 3, 3}, []bool{false, false, false, true, true}),
	}
	gs, ss = gatherOnRanks(t, step, shards)
	if want := []int{0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 7}; !slices.Equal(gs[0].Traj, want) {
		t.Errorf("step mode: Traj %v, want %v", gs[0].Traj, want)
	}
	if n, err := gs[0].Trajectories(); err != nil || n != 8 {
		t.Errorf("step mode: %d trajectories (%v), want 8", n, err)
	}
	if want := []bool{false, false, true, false, true, true, false, false, false, true, true}; !slices.Equal(gs[1].Truncated, want) {
		t.Errorf("step mode: Truncated %v, want %v", gs[1].Truncated, want)
	}
	if ss[1].SeqLo != 6 || ss[1].SeqHi != 11 || ss[1].Global != 8 {
		t.Errorf("step mode: rank 1's slice %+v, want sequences [6, 11) of 8 trajectories", ss[1])
	}
	// Rank 1 owns the part of a mini-batch past its first sequence.
	if own := ss[1].Own(gs[1].Slice(4, 11), 4, 11); own.NumSeqs() != 5 {
		t.Errorf("rank 1 owns %d sequences of the mini-batch [4, 11), want 5", own.NumSeqs())
	}
}
