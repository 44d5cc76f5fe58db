package synth_test

import (
	"fmt"
	"os"

	"github.com/r1go/r1go/data/synth"
)

// The embedded default world, its SFT warm-start subset, and one gold
// trajectory rendered in the Hermes/Qwen tool-call format.
func Example() {
	w := synth.Default()
	fmt.Println(w.Summary())

	sft, err := synth.SFTSubset(w.Train, synth.DefaultSFTOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	s := sft[0]
	fmt.Println(s.Question, "->", s.Answers[0])
	for _, step := range s.Gold.Steps {
		fmt.Printf("search %q finds %s in passage %s\n", step.Query, step.Found, step.Evidence)
	}
	for _, turn := range s.Gold.Turns() {
		fmt.Println(turn)
	}
	// The corpus in Search-R1's wiki-18 JSONL, for a BM25 index.
	if err := w.WriteCorpus(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
