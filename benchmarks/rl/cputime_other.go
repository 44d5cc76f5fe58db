//go:build !linux

package main

import "time"

// threadCPU is unavailable here; only wall-clock figures are reported.
func threadCPU() (time.Duration, bool) { return 0, false }
