// Package cuda implements model.Device on NVIDIA GPUs.
//
// The driver, cuBLAS/cuBLASLt and NVRTC are loaded at run time, so building
// r1go needs no CUDA toolkit and CGO_ENABLED=0 builds pass. Kernels are CUDA
// C++ sources embedded in the binary and compiled by NVRTC for the card on
// first use. Errors from the driver name the call that failed.
package cuda
