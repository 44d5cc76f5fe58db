package metrics

import (
	"math"
	"sync"
	"time"
)

// Summary returns verl's three statistics of per-sample values:
// prefix+"/mean", prefix+"/max" and prefix+"/min". With no values all three
// are 0, as rl.MaskedStats reports an empty mask. NaN propagates to all three.
func Summary(prefix string, xs []float64) map[string]float64 {
	m := make(map[string]float64, 3)
	AddSummary(m, prefix, xs)
	return m
}

// AddSummary stores Summary(prefix, xs) in dst.
func AddSummary(dst map[string]float64, prefix string, xs []float64) {
	var mean, hi, lo float64
	if len(xs) > 0 {
		hi, lo = math.Inf(-1), math.Inf(1)
		var sum float64
		for _, x := range xs {
			sum += x
			// math.Max and math.Min return NaN if either argument is NaN,
			// so a NaN sample shows up in every statistic.
			hi, lo = math.Max(hi, x), math.Min(lo, x)
		}
		mean = sum / float64(len(xs))
	}
	dst[prefix+"/mean"] = mean
	dst[prefix+"/max"] = hi
	dst[prefix+"/min"] = lo
}

// ClipRatio is the fraction of lengths that reached limit: verl's
// response_length/clip_ratio (limit = data.max_response_length) and
// prompt_length/clip_ratio (limit = data.max_prompt_length). verl tests
// length == limit; lengths here may run past the limit (a multi-turn
// response that ended on a long tool observation), so it counts length ≥
// limit. With no lengths it is 0.
func ClipRatio(lengths []int, limit int) float64 {
	if len(lengths) == 0 {
		return 0
	}
	clipped := 0
	for _, n := range lengths {
		if n >= limit {
			clipped++
		}
	}
	return float64(clipped) / float64(len(lengths))
}

// AddLengthSummary stores prefix/{mean,max,min,clip_ratio} of token counts in
// dst: verl's response_length/* with prefix "response_length" and limit
// data.max_response_length, and prompt_length/* likewise.
func AddLengthSummary(dst map[string]float64, prefix string, lengths []int, limit int) {
	xs := make([]float64, len(lengths))
	for i, n := range lengths {
		xs[i] = float64(n)
	}
	AddSummary(dst, prefix, xs)
	dst[prefix+"/clip_ratio"] = ClipRatio(lengths, limit)
}

// Phase names the trainer times, as verl names them in timing_s/{name}.
const (
	PhaseGen            = "gen"             // rollouts, tool calls included
	PhaseOldLogProb     = "old_log_prob"    // recomputing the rollout policy's logprobs
	PhaseRef            = "ref"             // the reference policy's logprobs
	PhaseValues         = "values"          // critic values
	PhaseAdv            = "adv"             // rewards, KL penalty and advantages
	PhaseUpdateCritic   = "update_critic"   // critic epochs
	PhaseUpdateActor    = "update_actor"    // actor epochs
	PhaseStep           = "step"            // the whole step, the phases above included
	PhaseTesting        = "testing"         // validation
	PhaseSaveCheckpoint = "save_checkpoint" // writing a checkpoint
)

// Timer adds up the wall time of a step's phases. Time a phase with
//
//	stop := timer.Start(metrics.PhaseGen)
//	... generate ...
//	stop()
//
// or timer.Time(name, f); timing the same name twice in a step adds the two.
// Metrics turns the totals into verl's timing and throughput metrics; Reset
// starts the next step. A Timer is safe for concurrent use.
type Timer struct {
	mu      sync.Mutex
	now     func() time.Time
	seconds map[string]float64
}

// NewTimer returns a Timer reading the wall clock.
func NewTimer() *Timer { return &Timer{now: time.Now, seconds: map[string]float64{}} }

// Start begins timing name and returns the function that ends it.
func (t *Timer) Start(name string) (stop func()) {
	start := t.now()
	return func() { t.Add(name, t.now().Sub(start).Seconds()) }
}

// Time runs f as phase name and returns its error.
func (t *Timer) Time(name string, f func() error) error {
	defer t.Start(name)()
	return f()
}

// Add adds seconds to phase name.
func (t *Timer) Add(name string, seconds float64) {
	t.mu.Lock()
	t.seconds[name] += seconds
	t.mu.Unlock()
}

// Seconds is the time recorded for name so far in this step.
func (t *Timer) Seconds(name string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seconds[name]
}

// Reset forgets every phase, for the next step.
func (t *Timer) Reset() {
	t.mu.Lock()
	clear(t.seconds)
	t.mu.Unlock()
}

// Tokens counts a step's tokens for the per-token and throughput metrics.
type Tokens struct {
	Prompt   int // valid prompt tokens in the batch (no padding)
	Response int // valid response tokens: model turns and tool observations
	Devices  int // accelerators (verl's n_gpus); 0 means 1
}

// perTokenPhases are the phases verl divides by a token count: generation
// by the response tokens, the others by all tokens.
var perTokenPhases = []string{PhaseGen, PhaseRef, PhaseValues, PhaseAdv, PhaseUpdateCritic, PhaseUpdateActor}

// Metrics returns, for the phases recorded:
//
//	timing_s/{name}              seconds
//	timing_per_token_ms/gen      1000·gen / response tokens
//	timing_per_token_ms/{ref, values, adv, update_critic, update_actor}
//	                             1000·seconds / (prompt + response tokens)
//	perf/total_num_tokens        prompt + response tokens
//	perf/time_per_step           timing_s/step
//	perf/throughput              total tokens / (time_per_step · devices)
//
// as verl's compute_timing_metrics and compute_throughout_metrics do. A
// per-token metric is left out when its token count is 0; the perf/ metrics
// need the step phase to have been timed.
func (t *Timer) Metrics(tok Tokens) map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]float64, 2*len(t.seconds)+3)
	for name, s := range t.seconds {
		m["timing_s/"+name] = s
	}
	total := tok.Prompt + tok.Response
	for _, name := range perTokenPhases {
		s, ok := t.seconds[name]
		n := total
		if name == PhaseGen {
			n = tok.Response
		}
		if ok && n > 0 {
			m["timing_per_token_ms/"+name] = s * 1000 / float64(n)
		}
	}
	if step, ok := t.seconds[PhaseStep]; ok {
		devices := max(tok.Devices, 1)
		m["perf/total_num_tokens"] = float64(total)
		m["perf/time_per_step"] = step
		if step > 0 {
			m["perf/throughput"] = float64(total) / (step * float64(devices))
		}
	}
	return m
}
