// Command tiers prints the CPU tiers this machine runs, best first, one
// line each: the values of R1GO_CPU worth testing here (.ci/run runs the
// kernel packages once per tier). -below leaves out the best one, which a
// run without R1GO_CPU already takes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/r1go/r1go/internal/isa"
)

func main() {
	below := flag.Bool("below", false, "only the tiers below this machine's best")
	flag.Parse()
	if os.Getenv("R1GO_CPU") != "" {
		fmt.Fprintln(os.Stderr, "tiers: R1GO_CPU is set; the tiers listed are the machine's, before the cap")
	}
	for _, t := range isa.Supported() {
		if *below && t == isa.Machine {
			continue
		}
		fmt.Println(t)
	}
}
