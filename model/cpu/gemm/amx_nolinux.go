//go:build !(linux && amd64)

package gemm

import "fmt"

// requestAMX: only Linux on amd64 is asked for the tile state here.
func requestAMX() error { return fmt.Errorf("AMX is used only on Linux on amd64") }
