package rl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/r1go/r1go/model"
)

// slotPolicy is a mock policy whose logits after a chunk put all mass on
// (slot + tokens held) mod vocab, so a greedy draw says which slot and how
// long a sequence it came from. It logs every call.
type slotPolicy struct {
	vocab, slots int
	held         []int
	log          []string
	onDevice     bool
}

func (p *slotPolicy) Vocab() int  { return p.vocab }
func (p *slotPolicy) Slots() int  { return p.slots }
func (p *slotPolicy) MaxLen() int { return 1 << 20 }
func (p *slotPolicy) Reset(slot int) {
	p.held[slot] = 0
	p.log = append(p.log, fmt.Sprintf("reset %d", slot))
}
func (p *slotPolicy) Fork(dst, src int) {
	p.held[dst] = p.held[src]
	p.log = append(p.log, fmt.Sprintf("fork %d<-%d", dst, src))
}
func (p *slotPolicy) Feed(chunks []model.Chunk) ([]float32, error) {
	out := make([]float32, len(chunks)*p.vocab)
	var fed []int
	for j, c := range chunks {
		p.held[c.Slot] += len(c.Tokens)
		out[j*p.vocab+(c.Slot+p.held[c.Slot])%p.vocab] = 1e4
		fed = append(fed, c.Slot)
	}
	p.log = append(p.log, fmt.Sprintf("feed %v", fed))
	return out, nil
}

// SamplesOnDevice and FeedSample make it a device that samples: greedy
// draws, the rows of keep returned.
func (p *slotPolicy) SamplesOnDevice() bool { return p.onDevice }
func (p *slotPolicy) FeedSample(chunks []model.Chunk, s model.Sampling, seeds []uint64, keep []int) (model.Decoded, error) {
	logits, _ := p.Feed(chunks)
	p.log[len(p.log)-1] += fmt.Sprintf(" T=%g keep %v", s.Temperature, keep)
	d := model.Decoded{Tokens: make([]int32, len(chunks)), LogProbs: make([]float32, len(chunks))}
	for j := range chunks {
		row := logits[j*p.vocab : (j+1)*p.vocab]
		d.Tokens[j] = int32(slices.Index(row, 1e4))
	}
	for _, j := range keep {
		d.Logits = append(d.Logits, logits[j*p.vocab:(j+1)*p.vocab]...)
	}
	return d, nil
}

type testSeq struct {
	seq
	name string
}

// group makes a leader with prompt and n-1 followers.
func group(name string, n int, prompt ...int32) []*testSeq {
	var out []*testSeq
	for i := 0; i < n; i++ {
		s := &testSeq{name: fmt.Sprintf("%s%d", name, i)}
		s.rng, s.sampling = rand.New(rand.NewPCG(1, uint64(i))), model.Greedy
		if i == 0 {
			s.pending = prompt
		} else {
			s.leader = &out[0].seq
		}
		out = append(out, s)
	}
	return out
}

func names(ss []*testSeq) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.name)
	}
	return out
}

// TestSchedulerAdmitsGroupsInOrder: groups are admitted whole and in
// submission order (a later group that would fit waits behind one that
// does not), into the slot freed last; a step forks each leader's prefill
// into its followers and hands the draws over followers first.
func TestSchedulerAdmitsGroupsInOrder(t *testing.T) {
	for _, dev := range []bool{false, true} {
		p := &slotPolicy{vocab: 16, slots: 4, held: make([]int, 4), onDevice: dev}
		q := newScheduler[*testSeq](p, 0)
		for _, g := range [][]*testSeq{group("a", 3, 1, 2), group("b", 2, 3), group("c", 1, 4, 5, 6)} {
			for _, s := range g {
				q.submit(s)
			}
		}
		q.admit()
		if got := names(q.active); !slices.Equal(got, []string{"a0", "a1", "a2"}) {
			t.Fatalf("admitted %v, want group a only (b does not fit, c waits behind it)", got)
		}
		if n := q.gather(); n != 1 {
			t.Fatalf("batch of %d, want the leader's prompt alone", n)
		}
		draws, err := q.step()
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, d := range draws {
			// Slot 0 held 2 prompt tokens: every member of group a draws 0+2.
			order = append(order, fmt.Sprintf("%s:%d", d.s.name, d.id))
			if d.s.state != seqDecode || len(d.s.pending) != 0 {
				t.Errorf("%s after its draw: state %d, %d pending", d.s.name, d.s.state, len(d.s.pending))
			}
		}
		if want := []string{"a1:2", "a2:2", "a0:2"}; !slices.Equal(order, want) {
			t.Errorf("device %v: draws %v, want %v", dev, order, want)
		}
		wantLog := []string{"reset 0", "reset 1", "reset 2", "feed [0]", "fork 1<-0", "fork 2<-0"}
		if dev {
			wantLog[3] = "feed [0] T=0 keep [0]"
		}
		if !slices.Equal(p.log, wantLog) {
			t.Errorf("device %v: policy calls %q, want %q", dev, p.log, wantLog)
		}
		// a1 finishes: with its slot (1) and slot 3 free, b fits, and takes
		// slot 1 first; c waits for the next free slot.
		q.release(q.active[1])
		q.compact()
		q.admit()
		if got := names(q.active); !slices.Equal(got, []string{"a0", "a2", "b0", "b1"}) || len(q.queue) != 1 {
			t.Fatalf("admitted %v with %d queued, want a0 a2 b0 b1 and c0 queued", got, len(q.queue))
		}
		if q.active[2].slot != 1 || q.active[3].slot != 3 {
			t.Errorf("b took slots %d and %d, want 1 and 3 (freed last first)", q.active[2].slot, q.active[3].slot)
		}
	}
}

// TestSchedulerDrops: a sequence whose context is done leaves, its slot
// freed when it had one; the others stay.
func TestSchedulerDrops(t *testing.T) {
	p := &slotPolicy{vocab: 8, slots: 1, held: make([]int, 1)}
	q := newScheduler[*testSeq](p, 0)
	ctx, cancel := context.WithCancel(context.Background())
	a, b, c := group("a", 1, 1)[0], group("b", 1, 2)[0], group("c", 1, 3)[0]
	a.ctx, b.ctx = ctx, ctx
	for _, s := range []*testSeq{a, b, c} {
		q.submit(s)
	}
	q.admit()
	cancel()
	var gone []string
	q.drop(func(s *testSeq, err error) { gone = append(gone, s.name) })
	if !slices.Equal(gone, []string{"a0", "b0"}) || len(q.free) != 1 || a.state != seqFinished {
		t.Fatalf("dropped %v with %d free slots, want a0 and b0 with the slot back", gone, len(q.free))
	}
	q.admit()
	if got := names(q.active); !slices.Equal(got, []string{"c0"}) {
		t.Fatalf("admitted %v after the drop, want c0", got)
	}
}

// TestSchedulerDeviceGroupsBySampling: on a device that samples, a batch
// with two sampling settings is fed as one step per setting, in the order
// they first appear, and only the rows of sequences that want them come
// back; the draws keep the batch's order.
func TestSchedulerDeviceGroupsBySampling(t *testing.T) {
	p := &slotPolicy{vocab: 16, slots: 3, held: make([]int, 3), onDevice: true}
	q := newScheduler[*testSeq](p, 0)
	hot := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	ss := []*testSeq{group("a", 1, 1)[0], group("b", 1, 2, 2)[0], group("c", 1, 3, 3, 3)[0]}
	ss[1].sampling, ss[2].wantRow = hot, true
	for _, s := range ss {
		q.submit(s)
	}
	q.admit()
	q.gather()
	draws, err := q.step()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"reset 0", "reset 1", "reset 2", "feed [0 2] T=0 keep [1]", "feed [1] T=1 keep []"}
	if !slices.Equal(p.log, want) {
		t.Errorf("policy calls %q, want %q", p.log, want)
	}
	for i, d := range draws {
		if d.s != ss[i] || d.id != int32(i+i+1) || (d.row != nil) != (i == 2) {
			t.Errorf("draw %d: %s drew %d (row %v), want %s, %d, a row only for c", i, d.s.name, d.id, d.row != nil, ss[i].name, 2*i+1)
		}
	}
}

// TestSchedulerPrefillBudget: with a budget, a step feeds every decode and
// cuts prompts to what is left, in admission order; a cut sequence draws
// nothing and keeps the rest of its prompt, its followers fork and draw
// only once the whole prompt is in; no step passes the budget.
func TestSchedulerPrefillBudget(t *testing.T) {
	for _, dev := range []bool{false, true} {
		p := &slotPolicy{vocab: 32, slots: 3, held: make([]int, 3), onDevice: dev}
		q := newScheduler[*testSeq](p, 4)
		a := group("a", 2, 1, 2, 3, 4, 5, 6, 7)
		c := group("c", 1, 8, 9, 10)[0]
		for _, s := range append(a, c) {
			q.submit(s)
		}
		q.admit()
		type want struct {
			fed   []int    // tokens of each chunk
			draws []string // name:id
		}
		steps := []want{
			{fed: []int{4}}, // a0's first 4 tokens; c0 waits
			{fed: []int{3, 1}, draws: []string{"a1:7", "a0:7"}}, // a0 done, c0 gets the 1 left; a1 forks
			{fed: []int{1, 1, 2}, draws: []string{"a0:8", "a1:9", "c0:5"}},
		}
		for i, w := range steps {
			q.gather()
			var fed []int
			total := 0
			for _, ch := range q.chunks {
				fed = append(fed, len(ch.Tokens))
				total += len(ch.Tokens)
			}
			if !slices.Equal(fed, w.fed) || total > 4 {
				t.Fatalf("device %v, step %d: chunks of %v tokens, want %v (budget 4)", dev, i+1, fed, w.fed)
			}
			draws, err := q.step()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range draws {
				got = append(got, fmt.Sprintf("%s:%d", d.s.name, d.id))
				d.s.pending = append(d.s.pending[:0], d.id) // decode on
			}
			if !slices.Equal(got, w.draws) {
				t.Errorf("device %v, step %d: draws %v, want %v", dev, i+1, got, w.draws)
			}
		}
		if a[0].state != seqDecode || c.state != seqDecode || p.held[0] != 8 || p.held[1] != 8 || p.held[2] != 3 {
			t.Errorf("device %v: states %d %d, held %v, want decode and 8 8 3", dev, a[0].state, c.state, p.held)
		}
	}
}

// TestSchedulerBudgetKeepsDraws: a budget changes when tokens are fed, not
// what a sequence sees: on random groups and budgets every sequence draws
// after the same numbers of tokens as without a budget, and no step feeds
// more than the budget.
func TestSchedulerBudgetKeepsDraws(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 50; trial++ {
		slots := 2 + rng.IntN(6)
		type spec struct{ n, prompt, draws int }
		var specs []spec
		for g := 0; g < 1+rng.IntN(6); g++ {
			specs = append(specs, spec{1 + rng.IntN(min(slots, 3)), 1 + rng.IntN(20), 1 + rng.IntN(5)})
		}
		run := func(budget int) map[string][]int {
			p := &slotPolicy{vocab: 1 << 10, slots: slots, held: make([]int, slots), onDevice: trial%2 == 1}
			q := newScheduler[*testSeq](p, budget)
			left := map[*testSeq]int{}
			for gi, sp := range specs {
				prompt := make([]int32, sp.prompt)
				for _, s := range group(fmt.Sprint("g", gi, "-"), sp.n, prompt...) {
					left[s] = sp.draws
					q.submit(s)
				}
			}
			seen := map[string][]int{}
			for steps := 0; len(q.queue)+len(q.active) > 0; steps++ {
				if steps > 10000 {
					t.Fatalf("trial %d budget %d: no progress", trial, budget)
				}
				q.admit()
				if q.gather() == 0 {
					q.compact()
					continue
				}
				total := 0
				for _, ch := range q.chunks {
					total += len(ch.Tokens)
				}
				if budget > 0 && total > budget {
					t.Fatalf("trial %d: a step fed %d tokens, budget %d", trial, total, budget)
				}
				draws, err := q.step()
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range draws {
					s := d.s
					// A follower's first token comes from its leader's row.
					from := s.slot
					if s.leader != nil && len(seen[s.name]) == 0 {
						from = s.leader.slot
					}
					seen[s.name] = append(seen[s.name], (int(d.id)-from+p.vocab)%p.vocab)
					if left[s]--; left[s] == 0 {
						q.release(s)
					} else {
						s.pending = append(s.pending[:0], d.id)
					}
				}
				q.compact()
			}
			return seen
		}
		want := run(0)
		budget := slots + rng.IntN(24)
		got := run(budget)
		for name, w := range want {
			if !slices.Equal(got[name], w) {
				t.Fatalf("trial %d (slots %d, budget %d): %s drew after %v tokens, without a budget after %v", trial, slots, budget, name, got[name], w)
			}
		}
	}
}
