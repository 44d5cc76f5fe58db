package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/r1go/r1go/benchmarks/internal/probe"
	"github.com/r1go/r1go/internal/isa"
)

// printMachine prints what the figures depend on: date, CPU model and the
// vector flags, core count, load, Go version.
func printMachine(threads int) {
	fmt.Printf("date     %s\n", time.Now().UTC().Format(time.RFC3339))
	model, flags := cpuInfo()
	fmt.Printf("cpu      %s, %d logical CPUs, %d threads used\n", model, runtime.NumCPU(), threads)
	fmt.Printf("flags    %s\n", flags)
	fmt.Printf("isa      FMA loops %v, best %s\n", probe.ISAs(), probe.BestISA())
	fmt.Printf("tier     %s\n", isa.Describe())
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load     %s", b)
	}
	fmt.Printf("go       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// cpuInfo reads the model name and the SIMD flags from /proc/cpuinfo
// (Linux); elsewhere it reports what it cannot know.
func cpuInfo() (model, flags string) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU (" + err.Error() + ")", "unknown"
	}
	var fam, mod string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && model == "":
			model = v
		case k == "cpu family" && fam == "":
			fam = v
		case k == "model" && mod == "":
			mod = v
		case k == "flags" && flags == "":
			var keep []string
			for _, f := range strings.Fields(v) {
				if strings.HasPrefix(f, "avx") || f == "fma" || f == "sse4_2" || f == "f16c" {
					keep = append(keep, f)
				}
			}
			flags = strings.Join(keep, " ")
		}
	}
	return fmt.Sprintf("%s (family %s model %s)", model, fam, mod), flags
}
