package model

// The CPU device lives in package model/cpu, which imports this package,
// so the tests of this package cannot import it; cpu_external_test.go
// (package model_test, which can) sets these before any test runs.
var (
	NewCPU           func() Device                  // cpu.New
	NewCPU64         func() Device                  // cpu.NewFloat64: the gradient checks' float64 device
	HostFloat32      func(Buffer) ([]float32, bool) // cpu.HostFloat32
	HostFloat64      func(Buffer) ([]float64, bool) // cpu.HostFloat64
	IsBF16           func(Buffer) bool              // cpu.IsBF16
	KVCacheHugePages *bool                          // &cpu.KVCacheHugePages
	TileLayoutOff    *bool                          // &cpu.TileLayoutOff
)

// host64 is the memory behind a buffer of the float64 CPU device.
func host64(b Buffer) []float64 { s, _ := HostFloat64(b); return s }
