package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/r1go/r1go/rl/metrics"
)

// emTable prints em.sh's runs as mean ± sample std over seeds per mode:
// the held-out EM after RL (the run's summary line), the last step's
// train EM and the mean step time.
func emTable(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*-s*.log"))
	if err != nil {
		return err
	}
	type run struct{ em, step, oldlp float64 }
	byMode := map[string][]run{}
	missing := []string{}
	for _, l := range logs {
		name := strings.TrimSuffix(filepath.Base(l), ".log")
		mode := name[:strings.LastIndex(name, "-s")]
		if _, err := os.Stat(filepath.Join(dir, name, "done")); err != nil {
			missing = append(missing, name)
			continue
		}
		em, err := heldOutEM(l)
		if err != nil {
			return err
		}
		recs, err := metrics.ReadJSONL(filepath.Join(dir, name, "metrics.jsonl"))
		if err != nil {
			return err
		}
		var step, oldlp float64
		n := 0
		for _, r := range recs {
			if v, ok := r.Data["timing_s/step"]; ok {
				step += v
				oldlp += r.Data["timing_s/old_log_prob"]
				n++
			}
		}
		byMode[mode] = append(byMode[mode], run{em, step / float64(max(n, 1)), oldlp / float64(max(n, 1))})
	}
	fmt.Println("| mode | runs | held-out EM after RL | RL step (s) | old-log-prob pass (s) |")
	fmt.Println("|---|---|---|---|---|")
	for _, mode := range []string{"off", "tis", "bypass"} {
		rs := byMode[mode]
		if len(rs) == 0 {
			continue
		}
		var em, st, ol []float64
		for _, r := range rs {
			em, st, ol = append(em, r.em), append(st, r.step), append(ol, r.oldlp)
		}
		fmt.Printf("| %s | %d | %s | %s | %s |\n", mode, len(rs), meanStd(em, 3), meanStd(st, 1), meanStd(ol, 2))
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		fmt.Printf("\nnot finished: %s\n", strings.Join(missing, ", "))
	}
	return nil
}

var afterRL = regexp.MustCompile(`^all\s+([0-9.]+)\s+([0-9.]+)`)

// heldOutEM reads the held-out EM after RL from a run's summary table
// (its "all" row: before, after, gain).
func heldOutEM(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	em := math.NaN()
	for sc.Scan() {
		if m := afterRL.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			em, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if math.IsNaN(em) {
		return 0, fmt.Errorf("%s: no held-out summary row", path)
	}
	return em, sc.Err()
}

func meanStd(x []float64, prec int) string {
	var s float64
	for _, v := range x {
		s += v
	}
	mu := s / float64(len(x))
	if len(x) < 2 {
		return strconv.FormatFloat(mu, 'f', prec, 64)
	}
	var ss float64
	for _, v := range x {
		ss += (v - mu) * (v - mu)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, mu, prec, math.Sqrt(ss/float64(len(x)-1)))
}
