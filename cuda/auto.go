package cuda

import (
	"fmt"
	"os"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// AutoPicksGPU decides what device "auto" means in every command
// (trainer.device=auto, -device auto). It was false until the CUDA device
// had run on real hardware: package cuda's suite, the transformers parity
// and a GRPO run of a Qwen2.5-0.5B-shaped model passed on an H200
// (benchmarks/gpu/README.md, benchmarks/cuda.md). Setting it false again
// is the whole switch back.
const AutoPicksGPU = true

// DryRunDevice is what a dry run plans for under a device setting
// ("auto", "cuda", "cpu") without loading anything: "cuda" when the
// setting is cuda, or auto with AutoPicksGPU and a GPU that opens; and
// that GPU's memory in bytes when one opens (a context only, no
// allocation), 0 when none does (a plan for a device not present).
func DryRunDevice(mode string) (kind string, capacity int64) {
	if mode != "cuda" && (mode != "auto" || !AutoPicksGPU) {
		return "cpu", 0
	}
	g, err := Open()
	if err != nil {
		if mode == "cuda" {
			return "cuda", 0
		}
		return "cpu", 0
	}
	defer g.Close() //nolint:errcheck // nothing was queued
	return "cuda", Capacity(g)
}

// Pick returns the device for a command's device setting:
//
//	"cpu"   the CPU device
//	"cuda"  the first GPU, or an error saying why there is none
//	"auto"  with AutoPicksGPU, the first GPU when one is present and a
//	        round trip through its memory works; otherwise the CPU
//
// note is one line for the command to print: the device, and when "auto"
// chose the CPU, why.
func Pick(mode string) (dev model.Device, note string, err error) {
	return PickWith(mode, DefaultOptions())
}

// DefaultOptions are the options Pick opens a GPU with: TF32 matmuls when
// R1GO_CUDA_TF32=1, no VMM arenas.
func DefaultOptions() Options { return Options{TF32: os.Getenv("R1GO_CUDA_TF32") == "1"} }

// PickWith is Pick opening a GPU with opts (cmd/train asks for VMM under
// ZeRO-2 and sharded masters).
func PickWith(mode string, opts Options) (dev model.Device, note string, err error) {
	switch mode {
	case "cpu":
		d := cpu.New()
		return d, "device: " + d.Name(), nil
	case "cuda":
		g, err := OpenWith(opts)
		if err != nil {
			return nil, "", fmt.Errorf("device cuda: %w", err)
		}
		return g, "device: " + g.Name(), nil
	case "auto":
		cpu := cpu.New()
		if !AutoPicksGPU {
			return cpu, fmt.Sprintf("device: %s (auto: the CUDA device is not yet verified on a GPU; device cuda selects it)", cpu.Name()), nil
		}
		g, err := OpenWith(opts)
		if err == nil {
			err = smokeTest(g)
		}
		if err != nil {
			return cpu, fmt.Sprintf("device: %s (auto: no working GPU: %v)", cpu.Name(), err), nil
		}
		return g, "device: " + g.Name(), nil
	}
	return nil, "", fmt.Errorf("unknown device %q (want auto, cpu or cuda)", mode)
}

// smokeTest sends a few numbers through the GPU's memory and back. The
// device panics on driver errors; the panic becomes the reason.
func smokeTest(g *Device) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	want := []float32{1, -2, 3.5, 0.25}
	b := g.Alloc(len(want))
	defer g.Free(b)
	g.Upload(b, want)
	got := make([]float32, len(want))
	g.Download(got, b)
	if err := g.Sync(); err != nil {
		return err
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("memory round trip gave %v for %v", got, want)
		}
	}
	return nil
}

// Capacity returns the device memory a plan may use, in bytes: the GPU's
// total memory, or 0 (unknown) for other devices.
func Capacity(dev model.Device) int64 {
	if g, ok := dev.(*Device); ok {
		_, total := g.MemInfo()
		return int64(total)
	}
	return 0
}

// Kind names a device's kind for a memory plan: "cuda" or "cpu".
func Kind(dev model.Device) string {
	if _, ok := dev.(*Device); ok {
		return "cuda"
	}
	return "cpu"
}
