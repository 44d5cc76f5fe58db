//go:build !linux

package model

// dropPages is a no-op where madvise is not available.
func dropPages([]byte) {}
