// Package cpu implements model.Device on the host: the reference device
// that every GPU op is tested against, and the one a run without a GPU
// trains and samples on. The central type is Device[F], storage in F
// (float32, or float64 for the model's finite-difference gradient checks)
// with reductions in float64, parallel over every core; New returns the
// float32 one. Its matrix products are package gemm's; its element-wise
// kernels (attention, RMSNorm, RoPE, SwiGLU, e^x, the rollout copy's
// float32 sampling) have AVX2 and AVX-512 assembly beside Go loops of the
// same bits, chosen per CPU tier (internal/isa), and arm64 takes the Go
// loops.
//
// Beyond model.Device it implements the capabilities model/device.go
// lists for the CPU: bfloat16 weights and moments (model.StoreBF16), a
// rollout copy's bf16-product weights and KV arena (model.StoreBF16Products,
// model.StoreKVArena) and their tile layout (BF16Products),
// host memory read in place, spilled to a file and dropped from the
// resident set (HostMemory), pages given back and counted (Pager), host
// sampling (Sampler, and a rollout copy's model.StoreEngineLogits) and kept
// logits (model.StoreKeptLogits).
//
// Errors: a buffer of another device, or shapes that do not match, are
// programmer errors and panic with a message that starts "cpu:"; so does a
// token id outside the vocabulary, which the model checks before a batch
// reaches the device. Spill returns the errors of the file system.
package cpu
