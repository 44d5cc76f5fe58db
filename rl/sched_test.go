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
		q := newScheduler[*testSeq](p)
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
	q := newScheduler[*testSeq](p)
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
	q := newScheduler[*testSeq](p)
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
