package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/rl"
)

// chains counts the trajectories of a dump on synthetic-world questions by
// where each left its question's chain of searches (synth.Diagnose), in
// all and by the question's hop count: what a run's failures are made of.
// A trajectory is right when its em metric is 1 (its reward otherwise).
func chains(out io.Writer, path string) error {
	recs, err := rl.ReadDump(path)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("%s holds no trajectories", path)
	}
	count := map[string]map[string]int{} // hop count ("all", "2-hop", ...) → verdict → trajectories
	total := map[string]int{}
	for _, r := range recs {
		right := r.Reward > 0
		if em, ok := r.Metrics["em"]; ok {
			right = em == 1
		}
		v, err := synth.Diagnose(r.Question, r.ToolCalls, r.Obs, right)
		if err != nil {
			return fmt.Errorf("trajectory %d: %w", r.Index, err)
		}
		for _, k := range []string{"all", strconv.Itoa(v.Hops) + "-hop"} {
			if count[k] == nil {
				count[k] = map[string]int{}
			}
			count[k][v.String()]++
			total[k]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		if k != "all" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range append([]string{"all"}, keys...) {
		fmt.Fprintf(out, "%s: %d trajectories\n", k, total[k])
		verdicts := make([]string, 0, len(count[k]))
		for v := range count[k] {
			verdicts = append(verdicts, v)
		}
		// Most frequent first, then by name.
		slices.SortFunc(verdicts, func(a, b string) int {
			return cmp.Or(cmp.Compare(count[k][b], count[k][a]), strings.Compare(a, b))
		})
		for _, v := range verdicts {
			fmt.Fprintf(out, "  %5d  %5.1f %%  %s\n", count[k][v], 100*float64(count[k][v])/float64(total[k]), v)
		}
	}
	return nil
}
