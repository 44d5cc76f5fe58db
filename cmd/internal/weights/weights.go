// Package weights checks a Hugging Face model folder's weights before a
// command uses them. Its one check, CheckFinite, returns an error naming the
// folder, the tensor and the count of NaN or Inf values it holds: a model
// that diverged in training must not be scored as if it were a model.
package weights

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// CheckFinite reads every tensor of the safetensors weights in dir, one at
// a time, and returns an error naming the first that holds NaN or ±Inf.
func CheckFinite(dir string) error {
	w, err := model.OpenWeights(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	var buf []float32
	for _, name := range w.Names() {
		shape, _ := w.Shape(name)
		n := 1
		for _, d := range shape {
			n *= d
		}
		if cap(buf) < n {
			buf = make([]float32, n)
		}
		buf = buf[:n]
		if err := w.ReadF32(name, buf); err != nil {
			return fmt.Errorf("weights: %s: %w", dir, err)
		}
		nan, inf, first := 0, 0, -1
		for i, v := range buf {
			if v-v == 0 { // finite: x-x is NaN only for NaN and ±Inf
				continue
			}
			if v != v {
				nan++
			} else {
				inf++
			}
			if first < 0 {
				first = i
			}
		}
		if nan+inf > 0 {
			return fmt.Errorf("weights: %s: tensor %s %v holds %d NaN and %d Inf values of %d (first at flat index %d); "+
				"the model diverged in training: use an earlier checkpoint", dir, name, shape, nan, inf, n, first)
		}
	}
	return nil
}
