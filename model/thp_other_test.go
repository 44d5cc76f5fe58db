//go:build !linux

package model

// thpLent: transparent huge pages are Linux's.
func thpLent() bool { return false }
