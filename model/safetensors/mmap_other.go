//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package safetensors

import "os"

// mapFile has no memory mapping on this OS; the caller reads the file.
func mapFile(f *os.File, size int64) ([]byte, bool, error) { return nil, false, nil }

func unmapFile(b []byte) error { return nil }
