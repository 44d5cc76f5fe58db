package rl

import "github.com/r1go/r1go/data"

// DropLongPrompts is CheckPrompts for skip mode (data.on_bad_record=skip):
// instead of refusing the dataset it returns the samples whose rendered
// prompt fits Cfg.MaxPromptTokens and how many were dropped, so the
// caller can print and log the count. A prompt that cannot be rendered is
// still an error.
func (r *Rollout) DropLongPrompts(samples []data.Sample) (kept []data.Sample, dropped int, err error) {
	long, _, err := r.longPrompts(samples)
	if err != nil {
		return nil, 0, err
	}
	kept = make([]data.Sample, 0, len(samples)-len(long))
	for i, smp := range samples {
		if len(long) > 0 && long[0] == i {
			long = long[1:]
			continue
		}
		kept = append(kept, smp)
	}
	return kept, len(samples) - len(kept), nil
}
