//go:build !linux

package probe

import "time"

func threadCPUTime() time.Duration { return 0 }

// ProcessCPUTime reports ok = false: this platform's clock is not wired up.
func ProcessCPUTime() (d time.Duration, ok bool) { return 0, false }
