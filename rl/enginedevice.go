package rl

import (
	"github.com/r1go/r1go/model"
)

// The engine on a device that samples (the CUDA device, a
// model.DeviceSampler): a step moves one token id and its sampler
// log-probability per request instead of a row of V logits, and decode
// steps replay as CUDA graphs (model.Decoder), as in the built-in rollout
// (devicesample.go). Only the rows of requests that ask for
// log-probabilities come back in full: the raw log-softmax value of the
// drawn token and the top alternatives are computed from them on the host,
// as on the host path. Each request's seed for a step is the next value of
// its own random stream, so what it draws does not depend on its batch
// neighbours, and equal request seeds draw equal tokens; greedy requests
// draw what the host path draws.

// sampleOnDevice feeds chunks (one per active request, in order) and draws
// each request's next token on the device. The device draws a batch under
// one sampling setting, so requests are grouped by setting, one step per
// group (one in the usual case of a single setting); each group's chunks
// go to their own cache slots, so the split changes no result.
func sampleOnDevice(dp DeviceSamplingPolicy, active []*genJob, chunks []model.Chunk, V int) ([]GenToken, error) {
	out := make([]GenToken, len(active))
	var order []model.Sampling
	groups := map[model.Sampling][]int{}
	for i, j := range active {
		s := j.req.Sampling
		if _, ok := groups[s]; !ok {
			order = append(order, s)
		}
		groups[s] = append(groups[s], i)
	}
	for _, s := range order {
		idx := groups[s]
		cs, seeds := make([]model.Chunk, len(idx)), make([]uint64, len(idx))
		var keep []int
		for k, i := range idx {
			j := active[i]
			cs[k], seeds[k] = chunks[i], j.rng.Uint64()
			if j.req.Logprobs || j.req.TopLogprobs > 0 {
				keep = append(keep, k)
			}
		}
		d, err := dp.FeedSample(cs, s, seeds, keep)
		if err != nil {
			return nil, err
		}
		kept := 0
		for k, i := range idx {
			t := GenToken{ID: d.Tokens[k], SampleLogprob: d.LogProbs[k]}
			if kept < len(keep) && keep[kept] == k {
				row := d.Logits[kept*V : (kept+1)*V]
				kept++
				lse := logSumExp(row)
				t.Logprob = row[t.ID] - lse
				if n := active[i].req.TopLogprobs; n > 0 {
					t.Top = topK(row, n, lse)
				}
			}
			out[i] = t
		}
	}
	return out, nil
}
