package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/r1go/r1go/internal/isa"
)

// TableInfo is what every run of one runs folder shares and the folder
// records in table.json: the CPU tier its runs are made at. The tier's
// kernels round differently (a seed's held-out EM moves by up to 0.17 from
// one tier to another), so a folder's rows compare, and its warm starts can
// be made again bit for bit, only at one tier. A folder made at a tier runs
// at it on any machine that has it, whichever machine finishes the table.
type TableInfo struct {
	CPU string
}

const tableFile = "table.json"

// pinCPU returns the tier the runs under out are made at and records it:
// the one table.json names, else asked, else the best this machine runs
// (best). Asking for another tier than the recorded one, or for one above
// best, is an error: the first would mix roundings in one table, the second
// would silently run below it (R1GO_CPU caps, it cannot raise).
func pinCPU(out, asked string, best isa.Tier) (string, error) {
	path := filepath.Join(out, tableFile)
	var info TableInfo
	err := readJSON(path, &info)
	switch {
	case err == nil:
		if asked != "" && asked != info.CPU {
			return "", fmt.Errorf("-cpu %s: the runs in %s are made at CPU tier %s (%s); use another -out for another tier", asked, out, info.CPU, path)
		}
	case errors.Is(err, os.ErrNotExist):
		info.CPU = asked
		if info.CPU == "" {
			info.CPU = best.String()
		}
	default:
		return "", err
	}
	tier, native, err := isa.Parse(info.CPU)
	if err != nil || native {
		return "", fmt.Errorf("%s: CPU tier %q is none of avx512, avx2, generic", path, info.CPU)
	}
	if tier > best {
		return "", fmt.Errorf("the runs in %s are made at CPU tier %s, above this machine's %s (R1GO_CPU or the CPU caps it); "+
			"finish the table on a machine with %s, or start another -out", out, info.CPU, best, info.CPU)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return info.CPU, writeJSON(path, info)
}

// recordedCPU is the tier table.json names, "" when there is none (a
// folder made before the tier was recorded, or not yet started).
func recordedCPU(out string) string {
	var info TableInfo
	if readJSON(filepath.Join(out, tableFile), &info) != nil {
		return ""
	}
	return info.CPU
}

// machine describes the CPU a run was made on: its model name, the cores
// Go sees and the platform (the tier is the table's, pinCPU).
func machine() string {
	name := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				name = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s", name, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

// machines lists the machines the table's runs were made on (RL runs and
// warm starts), most runs first, with their counts ("AMD EPYC, 2 cores,
// linux/amd64 (60 runs)"); runs from before machines were recorded count
// under this one.
func machines(table []RowResults) string {
	return tally(table, func(w *WarmResult) string { return w.Machine }, func(r *RunResult) string { return r.Machine }, machine())
}

// commits lists the commits the table's runs were made at, as machines
// does; runs from before commits were recorded count as unrecorded.
func commits(table []RowResults) string {
	return tally(table, func(w *WarmResult) string { return w.Commit }, func(r *RunResult) string { return r.Commit }, "unrecorded")
}

// tally counts the runs (a warm start shared by several rows once) by a
// property of theirs, an empty one as missing, most runs first.
func tally(table []RowResults, warm func(*WarmResult) string, run func(*RunResult) string, missing string) string {
	count := map[string]int{}
	seen := map[string]bool{}
	for _, rr := range table {
		for _, w := range rr.Warm {
			if !seen[w.EvalCommand] {
				seen[w.EvalCommand] = true
				count[cmp.Or(warm(w), missing)]++
			}
		}
		for _, r := range rr.Runs {
			count[cmp.Or(run(r), missing)]++
		}
	}
	if len(count) == 0 {
		return missing
	}
	names := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		return cmp.Or(count[b]-count[a], strings.Compare(a, b))
	})
	for i, m := range names {
		names[i] = fmt.Sprintf("%s (%d run%s)", m, count[m], map[bool]string{true: "s"}[count[m] != 1])
	}
	return strings.Join(names, "; ")
}
