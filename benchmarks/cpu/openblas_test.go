//go:build linux || darwin || freebsd

package main

import (
	"strings"
	"testing"
)

// A machine without OpenBLAS gets a clear error (the section turns it into
// a row), never a crash.
func TestOpenBLASMissingIsReported(t *testing.T) {
	saved := openBLASPaths
	openBLASPaths = []string{"/nonexistent/libopenblas.so.0"}
	defer func() { openBLASPaths = saved }()
	_, err := loadOpenBLAS()
	if err == nil || !strings.HasPrefix(err.Error(), "OpenBLAS not found") || !strings.Contains(err.Error(), "/nonexistent/libopenblas.so.0") {
		t.Fatalf("loadOpenBLAS() error = %v, want one starting \"OpenBLAS not found\" and naming the path", err)
	}
}
