//go:build cudaparity

package gpu

import (
	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model"
)

// Built only with -tags cudaparity, for the GPU machine: the parity tests
// then run on the CUDA device too, against the same fixtures and
// tolerances. Kept out of the default build so that CI and every other
// build do not depend on package cuda's state.
func init() {
	parityDevices = append(parityDevices, struct {
		name string
		open func() (model.Device, error)
	}{"cuda", func() (model.Device, error) {
		dev, _, err := cuda.Select("cuda")
		return dev, err
	}})
}
