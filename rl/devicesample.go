package rl

import (
	"slices"

	"github.com/r1go/r1go/model"
)

// Sampling on the device. On a device that draws tokens where its logits
// are (the CUDA device: model.DrawsOnDevice) a decode step moves one token
// id and its log-probability per row instead of a row of V logits, and a step whose
// chunks are single tokens replays as a CUDA graph (model.Decoder). On the
// CPU device nothing here runs: the scheduler feeds, downloads the logits
// and draws with model.SampleAll, so CPU runs stay bit-identical.

// DeviceSamplingPolicy is a Policy that can draw each chunk's next token
// where its logits are. The scheduler (sched.go) uses FeedSample instead of
// Feed when SamplesOnDevice is true.
type DeviceSamplingPolicy interface {
	Policy
	// SamplesOnDevice reports whether FeedSample draws on the device.
	SamplesOnDevice() bool
	// FeedSample appends each chunk's tokens to its slot like Feed and
	// draws each chunk's next token under s, chunk j's random numbers
	// chosen by seeds[j]; it returns the full logits only of the chunks
	// listed in keep (model.StepSample's contract).
	FeedSample(chunks []model.Chunk, s model.Sampling, seeds []uint64, keep []int) (model.Decoded, error)
}

// SamplesOnDevice is true when the model's device draws where its logits
// are (model.DrawsOnDevice).
func (p *ModelPolicy) SamplesOnDevice() bool { return model.DrawsOnDevice(p.M.Dev) }

// FeedSample runs one step through the policy's model.Decoder, made on
// first use and kept so its logits buffer and step graphs are reused.
func (p *ModelPolicy) FeedSample(chunks []model.Chunk, s model.Sampling, seeds []uint64, keep []int) (model.Decoded, error) {
	if p.dec == nil || p.dec.M != p.M || p.dec.C != p.Cache {
		if p.dec != nil {
			p.dec.Free()
		}
		p.dec = model.NewDecoder(p.M, p.Cache)
	}
	return p.dec.Step(chunks, s, seeds, keep)
}

// stepOnDevice is scheduler.step on a device that samples. The device
// draws a batch under one sampling setting, so the owners are grouped by
// setting, one forward step per group in the order the settings first
// appear (one step in the usual case of a single setting); each group's
// chunks go to their own cache slots, so the split changes no result. Each
// owner's seed is the next value of its own stream, so its draws do not
// depend on its batch neighbours, and greedy draws are the host path's.
// Only the rows of owners that want them or whose followers wait for their
// first token come back in full; those followers draw from the leader's row
// on the host with their own streams. An owner whose chunk the prefill
// budget cut is fed and its draw dropped.
func (q *scheduler[S]) stepOnDevice(dp DeviceSamplingPolicy) error {
	V := dp.Vocab()
	var order []model.Sampling
	groups := map[model.Sampling][]int{}
	for i, s := range q.owners {
		smp := s.base().sampling
		if _, ok := groups[smp]; !ok {
			order = append(order, smp)
		}
		groups[smp] = append(groups[smp], i)
	}
	first := make([]int, len(q.owners)) // index of each owner's draw in q.draws
	q.picks = q.picks[:0]
	var follow []int // indices in q.draws of followers' draws, drawn on the host
	for _, smp := range order {
		idx := groups[smp]
		cs, seeds := make([]model.Chunk, len(idx)), make([]uint64, len(idx))
		var keep []int
		for k, i := range idx {
			b := q.owners[i].base()
			cs[k] = q.chunks[i]
			if q.cut[i] {
				continue // its draw is dropped: its stream stays where it is
			}
			seeds[k] = b.rng.Uint64()
			if b.wantRow || slices.ContainsFunc(q.active, func(f S) bool { return firstFrom(f, b) }) {
				keep = append(keep, k)
			}
		}
		out, err := dp.FeedSample(cs, smp, seeds, keep)
		if err != nil {
			return err
		}
		kept := 0
		for k, i := range idx {
			d := drawn[S]{s: q.owners[i], id: out.Tokens[k], lp: out.LogProbs[k]}
			if kept < len(keep) && keep[kept] == k {
				d.row = out.Logits[kept*V : (kept+1)*V]
				kept++
			}
			first[i] = len(q.draws)
			q.draws = append(q.draws, d)
		}
	}
	// Put the draws in the host path's order (for each owner, its new
	// followers, then the owner) and draw the followers' first tokens.
	owned := q.draws
	q.draws = make([]drawn[S], 0, len(owned))
	for i, s := range q.owners {
		if q.cut[i] {
			continue
		}
		d := owned[first[i]]
		if d.row != nil {
			for _, f := range q.active {
				if firstFrom(f, s.base()) {
					follow = append(follow, len(q.draws))
					q.draws = append(q.draws, drawn[S]{s: f, row: d.row})
					q.picks = append(q.picks, model.Draw{Row: d.row, S: f.base().sampling, Rng: f.base().rng})
				}
			}
		}
		q.draws = append(q.draws, d)
	}
	model.SampleAll(q.picks)
	for k, i := range follow {
		q.draws[i].id, q.draws[i].lp = q.picks[k].ID, q.picks[k].LogProb
	}
	q.settle()
	return nil
}
