package model

// Optional device capabilities. A Device may implement these beyond the
// Device interface; callers check with a type assertion and keep their
// plain path when it does not, so the CPU device's results never change.

// MixedPrecision is a device that can compute from bf16 copies of float32
// weights (fp32 master weights, fp32 accumulation): UseBF16 registers one
// weight buffer, such as a Model's Params, and switches the device to
// mixed precision. The CUDA device implements it.
type MixedPrecision interface {
	UseBF16(weights Buffer)
}
