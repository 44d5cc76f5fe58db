// Package devsel opens the device a command or benchmark names (auto, cpu or cuda,
// through cuda.Pick) and, for commands that load a model, prints the
// memory plan first and stops before any work when it does not fit. The
// central type is Options. Errors are returned, never printed; they name
// the setting (Options.MemoryKey) or the device.
package devsel

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
)

// Options are a command's device settings.
type Options struct {
	Device string // auto, cpu or cuda; empty means auto
	Memory string // device memory to plan for, e.g. 80GiB; empty: the device's own
	DryRun bool   // plan for Device without opening anything, then stop
	// MemoryKey names Memory's setting in errors (device_memory,
	// -device-memory).
	MemoryKey string
	Log       io.Writer // the device line and the plan
}

// mode is Device with the empty default resolved.
func (o Options) mode() string {
	if o.Device == "" {
		return "auto"
	}
	return o.Device
}

// Open plans s for the model whose config.json is in modelDir, filling in
// s.Device, s.Capacity and, when zero, s.Threads, and opens the device; it
// prints the device line and the plan to o.Log. stop is true when the
// caller must not go on: a dry run (dev is nil then), or a plan that does
// not fit (err says so).
func (o Options) Open(modelDir string, s plan.Settings) (dev model.Device, stop bool, err error) {
	cfg, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return nil, true, err
	}
	s.Device = "cpu"
	if s.Threads == 0 {
		s.Threads = runtime.GOMAXPROCS(0)
	}
	if o.DryRun {
		s.Device, s.Capacity = cuda.DryRunDevice(o.mode())
	} else {
		if dev, err = Pick(o.mode(), o.Log); err != nil {
			return nil, true, err
		}
		s.Device, s.Capacity = cuda.Kind(dev), cuda.Capacity(dev)
	}
	if s.Device == "cpu" {
		s.Capacity = plan.HostMemory()
	}
	// What does not train loads its models frozen (LoadOptions Frozen,
	// DType auto): no gradients, and a bf16 folder stays bf16 on both
	// devices (each stores bf16); torch_dtype names the stored dtype.
	s.FrozenBF16 = !s.Train && cfg.DType == "bfloat16"
	if o.Memory != "" {
		if s.Capacity, err = plan.ParseSize(o.Memory); err != nil {
			return nil, true, fmt.Errorf("%s: %w", o.key(), err)
		}
	}
	p, err := plan.New(cfg, s)
	if err != nil {
		return nil, true, err
	}
	stop, err = plan.Report(o.Log, p, cfg, o.DryRun)
	return dev, stop, err
}

func (o Options) key() string {
	if o.MemoryKey == "" {
		return "device_memory"
	}
	return o.MemoryKey
}

// Pick opens the device for mode (cuda.Pick) and prints its one-line note
// (the device, and why auto chose the CPU) to log.
func Pick(mode string, log io.Writer) (model.Device, error) {
	dev, note, err := cuda.Pick(mode)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(log, note)
	return dev, nil
}

// Flag registers the -device flag (auto, cpu or cuda; default auto) on fs.
func Flag(fs *flag.FlagSet) *string {
	return fs.String("device", "auto", "device: auto, cpu or cuda (auto keeps the CPU until the GPU is verified)")
}
