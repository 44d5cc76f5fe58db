//go:build !amd64

package cpu

// No grouped kernels off amd64: AttentionCached runs its loops.
func attnKernelSets() []*attnKernels { return nil }

// Nor against a bf16 cache.
func attnBF16KernelSets() []*attnBF16Kernels { return nil }
