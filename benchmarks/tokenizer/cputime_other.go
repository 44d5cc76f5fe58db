//go:build !unix

package main

// cpuSeconds is not measured here; CPU-time figures read 0.
func cpuSeconds() float64 { return 0 }
