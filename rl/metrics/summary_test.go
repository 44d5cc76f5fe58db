package metrics

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	cases := []struct {
		xs             []float64
		mean, max, min float64
	}{
		{[]float64{1, 2, 3, 6}, 3, 6, 1},    // 12/4
		{[]float64{-0.5}, -0.5, -0.5, -0.5}, // one sample
		{[]float64{0.25, -1, 0.75}, 0, 0.75, -1},
		{nil, 0, 0, 0}, // as rl.MaskedStats on an empty mask
	}
	for _, c := range cases {
		m := Summary("critic/score", c.xs)
		if len(m) != 3 || m["critic/score/mean"] != c.mean || m["critic/score/max"] != c.max || m["critic/score/min"] != c.min {
			t.Errorf("Summary(%v) = %v, want mean %v max %v min %v", c.xs, m, c.mean, c.max, c.min)
		}
	}
	m := Summary("x", []float64{1, math.NaN(), 3})
	for _, k := range []string{"x/mean", "x/max", "x/min"} {
		if !math.IsNaN(m[k]) {
			t.Errorf("%s = %v with a NaN sample, want NaN", k, m[k])
		}
	}
}

func TestLengthSummary(t *testing.T) {
	m := map[string]float64{}
	// Limit 8: 8 and 9 reached it, 2 of 5.
	AddLengthSummary(m, "response_length", []int{3, 8, 5, 9, 0}, 8)
	want := map[string]float64{
		"response_length/mean": 5, "response_length/max": 9, "response_length/min": 0,
		"response_length/clip_ratio": 0.4,
	}
	if len(m) != len(want) {
		t.Errorf("got %v", m)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if r := ClipRatio(nil, 8); r != 0 {
		t.Errorf("ClipRatio(nil) = %v", r)
	}
}

// stepClock advances by the given durations on successive readings.
func stepClock(steps ...time.Duration) func() time.Time {
	now := time.Unix(1000, 0)
	i := 0
	return func() time.Time {
		t := now
		if i < len(steps) {
			now = now.Add(steps[i])
			i++
		}
		return t
	}
}

func TestTimer(t *testing.T) {
	tm := NewTimer()
	// Readings: step start, gen start, gen end (+2 s), gen again (+1 s),
	// update_actor (+0.5 s), ref (+0.25 s), step end. Each pair of readings
	// brackets one phase; the clock moves by the listed gap between them.
	tm.now = stepClock(0, 2*time.Second, 0, time.Second, 0, 500*time.Millisecond, 0, 250*time.Millisecond, 0, 0)
	stopStep := tm.Start(PhaseStep)
	tm.Start(PhaseGen)()
	if err := tm.Time(PhaseGen, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	wantErr := errors.New("boom")
	if err := tm.Time(PhaseUpdateActor, func() error { return wantErr }); err != wantErr {
		t.Errorf("Time returned %v", err)
	}
	tm.Start(PhaseRef)()
	tm.Add(PhaseTesting, 4)
	stopStep()

	got := tm.Metrics(Tokens{Prompt: 1000, Response: 3000, Devices: 2})
	// By hand: gen 2+1 = 3 s, update_actor 0.5 s, ref 0.25 s, step = all
	// clock movement = 3.75 s; 4000 tokens in all.
	want := map[string]float64{
		"timing_s/step":                    3.75,
		"timing_s/gen":                     3,
		"timing_s/update_actor":            0.5,
		"timing_s/ref":                     0.25,
		"timing_s/testing":                 4,
		"timing_per_token_ms/gen":          1,      // 3000 ms / 3000 response tokens
		"timing_per_token_ms/update_actor": 0.125,  // 500 ms / 4000 tokens
		"timing_per_token_ms/ref":          0.0625, // 250 ms / 4000 tokens
		"perf/total_num_tokens":            4000,
		"perf/time_per_step":               3.75,
		"perf/throughput":                  4000 / (3.75 * 2),
	}
	if len(got) != len(want) {
		t.Errorf("Metrics has %d entries, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}

	tm.Reset()
	if got := tm.Metrics(Tokens{}); len(got) != 0 {
		t.Errorf("after Reset: %v", got)
	}
	tm.Add(PhaseStep, 0)
	tm.Add(PhaseGen, 1)
	if got := tm.Metrics(Tokens{}); len(got) != 4 || got["perf/total_num_tokens"] != 0 {
		// timing_s/step, timing_s/gen, perf/total_num_tokens, perf/time_per_step;
		// no per-token metric without tokens, no throughput for a zero step
		t.Errorf("empty step: %v", got)
	}
}
