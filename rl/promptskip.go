package rl

import (
	"fmt"

	"github.com/r1go/r1go/data"
)

// DropLongPrompts is CheckPrompts for skip mode (data.on_bad_record=skip):
// instead of refusing the dataset it returns the samples whose rendered
// prompt fits Cfg.MaxPromptTokens and how many were dropped, so the
// caller can print and log the count. A prompt that cannot be rendered is
// still an error.
func (r *Rollout) DropLongPrompts(samples []data.Sample) (kept []data.Sample, dropped int, err error) {
	kept = make([]data.Sample, 0, len(samples))
	for i, smp := range samples {
		msgs, tools := r.Env.Episode().Reset(smp)
		ids, err := r.encodePrompt(msgs, tools)
		if err != nil {
			return nil, 0, fmt.Errorf("rl: sample %d (%s): %w", i, smp.ID, err)
		}
		if len(ids) > r.Cfg.MaxPromptTokens {
			dropped++
			continue
		}
		kept = append(kept, smp)
	}
	return kept, dropped, nil
}
