package gpu

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/rl/metrics"
)

// tbRunSteps is how many steps the run logs; the 0th and some others log
// only part of the keys, as a trainer that validates every few steps does.
const tbRunSteps = 60

// tbRunValues are the metrics of step s: verl's names, values that cover
// float32 rounding, integers, tiny and huge magnitudes, NaN and ±Inf.
func tbRunValues(s int) map[string]float64 {
	x := float64(s)
	v := map[string]float64{
		"critic/score/mean":           math.Sin(x) / 3,
		"critic/score/max":            1,
		"critic/rewards/mean":         0.1 + x/7,
		"actor/pg_loss":               -0.01 * math.Cos(x*1.3),
		"actor/entropy":               2.5 - x/50,
		"actor/kl_loss":               1e-7 * x,
		"actor/grad_norm":             math.Exp(x / 6),
		"actor/lr":                    1e-6,
		"response_length/mean":        200 + 3*x,
		"response_length/clip_ratio":  x / tbRunSteps,
		"timing_s/gen":                12.345678901234 + x,
		"perf/throughput":             5712.5 * (1 + x/100),
		"perf/total_num_tokens":       float64(4096 * (s + 1)),
		"training/global_step":        x,
		"num_turns/mean":              1 + math.Mod(x, 4),
		"val-aux/nq/f1/mean@1":        0.3,
		"big/float32_overflow_to_inf": 1e300,
		"small/denormal_in_float32":   1e-40,
	}
	switch s % 10 {
	case 3:
		v["actor/pg_loss"] = math.NaN()
	case 7:
		v["actor/grad_norm"] = math.Inf(1)
		v["actor/kl_loss"] = math.Inf(-1)
	}
	if s%20 == 0 {
		v["val-core/nq/reward/mean@1"] = 0.25 + x/400
	}
	if s == 0 {
		delete(v, "timing_s/gen")
	}
	return v
}

// TestMetricsRunForTensorBoard writes a run through metrics.Open with the
// JSONL and TensorBoard sinks, as the trainer does, and reads both back
// with rl/metrics' own readers. With R1GO_METRICS_DIR set the run stays
// there (metrics.jsonl and tensorboard/) for tb_readback.py, which reads the
// event file with the tensorboard package and checks every scalar against
// the JSONL file.
func TestMetricsRunForTensorBoard(t *testing.T) {
	dir := os.Getenv("R1GO_METRICS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	tbDir := filepath.Join(dir, "tensorboard")
	log, err := metrics.Open(metrics.Config{Sinks: []string{"jsonl", "tensorboard"}, Dir: dir, TensorBoardDir: tbDir})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for s := range tbRunSteps {
		vals := tbRunValues(s)
		want += len(vals)
		if err := log.Log(s, vals); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != tbRunSteps {
		t.Fatalf("metrics.jsonl holds %d records, want %d", len(recs), tbRunSteps)
	}
	files, _ := filepath.Glob(filepath.Join(tbDir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("%s holds %d event files, want 1", tbDir, len(files))
	}
	scalars, err := metrics.ReadEvents(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(scalars) != want {
		t.Fatalf("%s holds %d scalars, want %d", files[0], len(scalars), want)
	}
	for _, sc := range scalars {
		exp := float32(tbRunValues(int(sc.Step))[sc.Tag])
		bothNaN := sc.Value != sc.Value && exp != exp
		if math.Float32bits(sc.Value) != math.Float32bits(exp) && !bothNaN {
			t.Errorf("event step %d %s = %v, logged %v", sc.Step, sc.Tag, sc.Value, exp)
		}
	}
	for _, r := range recs {
		for k, v := range tbRunValues(r.Step) {
			if got, ok := r.Data[k]; !ok || got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
				t.Errorf("metrics.jsonl step %d %s = %v, logged %v", r.Step, k, got, v)
			}
		}
	}
	t.Logf("run in %s: %d steps, %d scalars; check it with: python3 benchmarks/gpu/tb_readback.py %s", dir, tbRunSteps, want, dir)
}
