package cuda

import (
	"errors"
	"fmt"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// Select returns the device a command asked for by name:
//
//	"cpu"   the CPU device
//	"cuda"  the first GPU, or an error (wrapping ErrNoDriver or ErrNoDevice
//	        when the machine has none)
//	"auto"  the first GPU when the machine has one, else the CPU
//
// note says what was chosen and, when "auto" fell back to the CPU, why;
// commands print it. A GPU that is present but fails to open is an error
// under "auto" too: silently training on the CPU would hide it.
func Select(mode string) (dev model.Device, note string, err error) {
	switch mode {
	case "cpu":
		d := cpu.New()
		return d, "device: " + d.Name(), nil
	case "cuda", "auto":
		g, err := Open()
		if err == nil {
			return g, "device: " + g.Name(), nil
		}
		if mode == "auto" && (errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice)) {
			d := cpu.New()
			return d, fmt.Sprintf("device: %s (no GPU: %v)", d.Name(), err), nil
		}
		return nil, "", err
	}
	return nil, "", fmt.Errorf("cuda: unknown device %q (want auto, cuda or cpu)", mode)
}
