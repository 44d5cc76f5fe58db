package data_test

import (
	"fmt"
	"log"

	"github.com/r1go/r1go/data"
)

// Load a Search-R1 parquet file, skipping bad rows but listing them, and
// deal it in shuffled batches that survive a restart.
func Example() {
	samples, rep, err := data.Load("testdata/searchr1_element.parquet", data.LoadOptions{SkipMalformed: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, bad := range rep.Skipped {
		log.Print(bad) // data: <file> row <n>: field "<name>": <what>
	}
	sampler, err := data.NewSampler(len(samples), data.SamplerConfig{BatchSize: 2, Seed: 1, Shuffle: true, DropLast: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, i := range sampler.Next() {
		fmt.Println(samples[i].ID, samples[i].Question, samples[i].Answers)
	}
	state := sampler.State() // save with the checkpoint; Restore(state) resumes
	_ = state
}
