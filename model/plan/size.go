package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a memory size: a number with a unit, binary (KiB, MiB,
// GiB, TiB) or decimal (KB, MB, GB, TB, as GPU vendors quote them), or a
// bare number of bytes. "80GiB" is 80·2^30 bytes; "80GB" is 80·10^9.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v*mult >= 1) || v*mult > 1<<60 {
		return 0, fmt.Errorf("plan: memory size %q is not a positive number with a unit such as 80GiB, 80GB or 512MiB", s)
	}
	return int64(v * mult), nil
}
