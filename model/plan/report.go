package plan

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/r1go/r1go/model"
)

// Report prints p and decides whether the command goes on. A dry run
// prints whether the plan fits and what would make it fit, then stops
// without error. Otherwise a plan that does not fit stops with Check's
// error, before any work; one that fits goes on.
func Report(w io.Writer, p *Plan, cfg *model.Config, dryRun bool) (stop bool, err error) {
	p.Print(w)
	if dryRun {
		switch {
		case p.Settings.Capacity <= 0:
			fmt.Fprintln(w, "dry run: the device's capacity is unknown (set the device memory to check the fit)")
		case p.Fits():
			fmt.Fprintln(w, "dry run: the plan fits")
		default:
			fmt.Fprintln(w, "dry run: the plan does NOT fit")
			if adv := p.Advice(cfg); len(adv) > 0 {
				fmt.Fprintln(w, "to fit, set", strings.Join(adv, "; or "))
			} else {
				fmt.Fprintln(w, p.noFit(cfg))
			}
		}
		return true, nil
	}
	if err := p.Check(cfg); err != nil {
		return true, err
	}
	return false, nil
}

// HostMemory is the machine's total memory from /proc/meminfo, the CPU
// device's capacity; 0 when unknown.
func HostMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
