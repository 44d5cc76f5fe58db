// Package devsel is the device section every command shares: which device
// to open (auto, cpu or cuda, through cuda.PickWith), the memory to plan
// for, and whether to stop after the plan. The central type is Config,
// inlined by train (under trainer:), eval, score and serve, so the keys
// are device, device_memory and dry_run everywhere. For commands that load
// a model, Open prints the memory plan first and stops before any work
// when the plan does not fit. Errors are returned, never printed; they
// name the setting or the device.
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

// Config is a command's device section.
type Config struct {
	Device       string `yaml:"device" help:"auto, cpu or cuda (auto: a working GPU when there is one)"`
	DeviceMemory string `yaml:"device_memory" help:"device memory to plan for, e.g. 80GiB or 80GB (empty: the device's own; plans a device that is not present)"`
	DryRun       bool   `yaml:"dry_run" help:"print the memory plan (from config.json alone) and exit, saying whether it fits"`
}

// Default picks the device automatically and plans for its own memory.
func Default() Config { return Config{Device: "auto"} }

// Validate reports an unknown device or a memory size that does not parse.
// A command that inlines Config calls it from its own Validate (the config
// loader checks an inlined section through its parent).
func (c *Config) Validate() error {
	switch c.mode() {
	case "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("device %q is not auto, cpu or cuda", c.Device)
	}
	if c.DeviceMemory != "" {
		if _, err := plan.ParseSize(c.DeviceMemory); err != nil {
			return fmt.Errorf("device_memory: %w", err)
		}
	}
	return nil
}

// mode is Device with the empty default resolved.
func (c Config) mode() string {
	if c.Device == "" {
		return "auto"
	}
	return c.Device
}

// Pick opens the device c names with opts (cuda.PickWith: TF32, VMM
// arenas) and returns it with its one-line note: the device, and when auto
// chose the CPU, why. The caller prints the note where its log wants it.
func (c Config) Pick(opts cuda.Options) (model.Device, string, error) {
	return cuda.PickWith(c.mode(), opts)
}

// Settle fills in what the plan s needs to know of the device: its kind,
// its capacity (device_memory when set, else the GPU's own or the host's
// memory) and, when zero, the threads. dev is the opened device, or nil in
// a dry run, which opens nothing and plans for the device Pick would
// choose (cuda.DryRunDevice reads a present GPU's memory without
// allocating).
func (c Config) Settle(s *plan.Settings, dev model.Device) error {
	if s.Threads == 0 {
		s.Threads = runtime.GOMAXPROCS(0)
	}
	if dev != nil {
		s.Device, s.Capacity = cuda.Kind(dev), cuda.Capacity(dev)
	} else {
		s.Device, s.Capacity = cuda.DryRunDevice(c.mode())
	}
	if s.Device == "cpu" {
		s.Capacity = plan.HostMemory()
	}
	if c.DeviceMemory != "" {
		var err error
		if s.Capacity, err = plan.ParseSize(c.DeviceMemory); err != nil {
			return fmt.Errorf("device_memory: %w", err)
		}
	}
	return nil
}

// Open plans s for the frozen model whose config.json is in modelDir and
// opens the device (unless a dry run), printing the device line and the
// plan to log. What does not train loads its models frozen, so
// s.FrozenBF16 follows the folder's dtype when s.Train is false. stop is
// true when the caller must not go on: a dry run (dev is nil then), or a
// plan that does not fit (err says so).
func (c Config) Open(modelDir string, s plan.Settings, log io.Writer) (dev model.Device, stop bool, err error) {
	cfg, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return nil, true, err
	}
	if err := c.Validate(); err != nil {
		return nil, true, err
	}
	if !c.DryRun {
		var note string
		if dev, note, err = c.Pick(cuda.DefaultOptions()); err != nil {
			return nil, true, err
		}
		fmt.Fprintln(log, note)
	}
	if err := c.Settle(&s, dev); err != nil {
		return nil, true, err
	}
	// LoadOptions Frozen, DType auto: no gradients, and a bf16 folder stays
	// bf16 on both devices (each stores bf16); torch_dtype names the stored
	// dtype.
	s.FrozenBF16 = !s.Train && cfg.DType == "bfloat16"
	p, err := plan.New(cfg, s)
	if err != nil {
		return nil, true, err
	}
	stop, err = plan.Report(log, p, cfg, c.DryRun)
	return dev, stop, err
}

// Flag registers the -device flag (auto, cpu or cuda; default auto) on fs,
// for the benchmarks, which take flags only.
func Flag(fs *flag.FlagSet) *string {
	return fs.String("device", "auto", "device: auto, cpu or cuda (auto: a working GPU when there is one)")
}

// Pick opens the device mode names with the default options and prints its
// note to log (the benchmarks' -device).
func Pick(mode string, log io.Writer) (model.Device, error) {
	dev, note, err := Config{Device: mode}.Pick(cuda.DefaultOptions())
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(log, note)
	return dev, nil
}
