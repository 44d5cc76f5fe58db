package model_test

import (
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// The internal tests run on the CPU device through cpu_hooks_test.go.
func init() {
	model.NewCPU = cpu.New
	model.NewCPU64 = func() model.Device { return cpu.NewFloat64() }
	model.HostFloat32 = cpu.HostFloat32
	model.HostFloat64 = cpu.HostFloat64
	model.IsBF16 = cpu.IsBF16
	model.KVCacheHugePages = &cpu.KVCacheHugePages
	model.TileLayoutOff = &cpu.TileLayoutOff
}
