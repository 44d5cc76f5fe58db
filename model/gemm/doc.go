// Package gemm implements single-precision general matrix multiplication
// (SGEMM) for row-major matrices on the CPU: C = alpha·op(A)·op(B) + beta·C.
//
// The central type is Engine: a micro-kernel choice plus a thread count.
// The package-level Sgemm and SgemmStridedBatched use the default engine,
// which picks the fastest kernel this CPU supports (AVX-512, then AVX2+FMA,
// then portable Go) and runs on GOMAXPROCS goroutines.
//
// # Algorithm
//
// The loops follow the GotoBLAS/BLIS layering, written for row-major C.
// op(A) is cut into row blocks of MB rows and depth blocks of KC; each block
// is packed once, shared by all threads, into MR-row micro-panels (L1 resident
// while the micro-kernel runs). Each thread owns a range of C's columns and
// packs its own KC×NB block of op(B) into NR-wide micro-panels (L2 resident).
// The micro-kernel multiplies one A micro-panel by one B micro-panel into an
// MR×NR tile of C held in vector registers. Edge tiles go through a small
// scratch tile, so no shape needs padding by the caller.
//
// The packed A micro-panel is read through two strides (bytes per k step,
// bytes per row), so a non-transposed A packs by plain row copies and a
// transposed A by plain k-row copies: neither needs a scalar transpose.
// Only a transposed B is transposed while packing.
//
// # Numerics
//
// Products are accumulated in float32 in k order within each KC block, so
// the error of each element is bounded by about k·eps·Σ|a||b| (eps = 2⁻²⁴),
// the usual bound for a float32 dot product.
//
// # Errors
//
// There are no returned errors. A call whose dimensions or leading dimensions
// do not fit the slices it is given is a programmer's mistake and panics with
// a message that starts with "gemm:" and names the argument. When beta is 0,
// C is only written, never read, so it may hold NaN or Inf. Only C is
// overwritten; A and B are read-only.
package gemm
