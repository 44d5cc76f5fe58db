package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// The tiers mode (-tiers avx512,avx2): the same sections at each CPU tier
// (R1GO_CPU, package internal/isa), each in a child process of this
// command, since the tier is read once at start-up. The children take
// turns (-tier_turns times through the list), so a load that comes and
// goes on a shared machine falls on every tier alike; the table gives each
// figure per tier, the best of its turns, and its ratio to the first
// tier's: same-run ratios between tiers, beside each child's own ratios to
// its same-run denominators (printed in its output).

// jsonRow is row for the children's reports.
type jsonRow struct {
	Section, Name, Unit, Note string
	Value                     float64
}

// writeRows saves rows as JSON for the parent (-rows_json).
func writeRows(path string, rows []row) error {
	out := make([]jsonRow, len(rows))
	for i, r := range rows {
		out[i] = jsonRow{r.section, r.name, r.unit, r.note, r.value}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// lowerIsBetter says whether a smaller value of unit is the better figure
// (times), for keeping the best of a tier's turns.
func lowerIsBetter(unit string) bool {
	switch unit {
	case "s", "ms", "µs", "ns", "GB", "MB", "GiB", "MiB":
		return true
	}
	return false
}

// runTiers runs this command again for each tier and turn, with args (the
// command line without -tiers), and prints the figures side by side.
func runTiers(tiers []string, turns int, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "r1go-tiers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type key struct{ section, name string }
	var order []key
	best := map[key][]float64{} // per tier; 0 where not measured
	units := map[key]string{}
	for turn := 0; turn < turns; turn++ {
		for ti, tier := range tiers {
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", tier, turn))
			fmt.Printf("== tier %s, turn %d of %d\n", tier, turn+1, turns)
			cmd := exec.Command(self, append([]string{"-rows_json", path}, args...)...)
			cmd.Env = append(os.Environ(), "R1GO_CPU="+tier)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("tier %s: %v", tier, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var rows []jsonRow
			if err := json.Unmarshal(b, &rows); err != nil {
				return err
			}
			for _, r := range rows {
				k := key{r.Section, r.Name}
				if r.Unit == "" {
					continue
				}
				if _, ok := best[k]; !ok {
					order = append(order, k)
					best[k] = make([]float64, len(tiers))
					units[k] = r.Unit
				}
				v := &best[k][ti]
				if *v == 0 || lowerIsBetter(r.Unit) == (r.Value < *v) {
					*v = r.Value
				}
			}
		}
	}
	fmt.Printf("\nbest of %d turn(s) per tier; ratio: ÷ the %s figure of the same run\n", turns, tiers[0])
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	head := "section\tfigure\tunit\t"
	for _, t := range tiers {
		head += t + "\t"
	}
	for _, t := range tiers[1:] {
		head += t + "/" + tiers[0] + "\t"
	}
	fmt.Fprintln(w, head)
	for _, k := range order {
		v := best[k]
		line := []string{k.section, k.name, units[k]}
		for _, x := range v {
			line = append(line, fmt.Sprintf("%.1f", x))
		}
		for _, x := range v[1:] {
			r := "-"
			if v[0] != 0 && x != 0 {
				r = fmt.Sprintf("%.2f", x/v[0])
			}
			line = append(line, r)
		}
		fmt.Fprintln(w, strings.Join(line, "\t")+"\t")
	}
	return w.Flush()
}
