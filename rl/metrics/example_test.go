package metrics_test

import (
	"fmt"
	"os"

	"github.com/r1go/r1go/rl/metrics"
)

// A trainer step: per-sample statistics, phase timings and throughput go to
// the console in verl's format. A real run adds "jsonl", "tensorboard" and
// "progress" to Sinks and a History sink for the final plot.
func Example() {
	log, err := metrics.Open(metrics.Config{Sinks: []string{"console"}, Console: os.Stdout})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	timer := metrics.NewTimer()
	timer.Add(metrics.PhaseGen, 6)  // stop := timer.Start(metrics.PhaseGen) ... stop()
	timer.Add(metrics.PhaseStep, 8) // in a real step

	values := metrics.Summary("critic/score", []float64{1, 0, 0, 0.5})
	metrics.AddLengthSummary(values, "response_length", []int{120, 512, 300, 64}, 512)
	for k, v := range timer.Metrics(metrics.Tokens{Prompt: 1000, Response: 1000}) {
		values[k] = v
	}
	if err := log.Log(1, values); err != nil {
		fmt.Println(err)
	}
	// Output:
	// step:1 - critic/score/max:1 - critic/score/mean:0.375 - critic/score/min:0 - perf/throughput:250 - perf/time_per_step:8 - perf/total_num_tokens:2000 - response_length/clip_ratio:0.25 - response_length/max:512 - response_length/mean:249 - response_length/min:64 - timing_per_token_ms/gen:6 - timing_s/gen:6 - timing_s/step:8
}
