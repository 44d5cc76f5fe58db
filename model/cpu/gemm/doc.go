// Package gemm implements single-precision general matrix multiplication
// (SGEMM) for row-major matrices on the CPU: C = alpha·op(A)·op(B) + beta·C.
//
// The central type is Engine: a micro-kernel choice plus a thread count.
// The package-level Sgemm and SgemmStridedBatched use the default engine,
// which picks the fastest kernel this CPU supports (AVX-512, then AVX2+FMA,
// then portable Go) and runs on GOMAXPROCS goroutines. R1GO_CPU caps the
// choice (package internal/isa): avx2 leaves the AVX2 and Go kernels,
// generic the Go one only, and the bf16, AVX512_BF16 and AMX paths follow
// the same cap.
//
// # Algorithm
//
// The loops follow the GotoBLAS/BLIS layering, written for row-major C.
// For each NC-wide column block of op(B) and each KC-deep slice of the sum,
// the threads pack that KC×NC block of op(B) into NR-wide micro-panels and
// an MB×KC block of op(A) into MR-row micro-panels, both shared, one
// micro-panel per work item. Then they multiply: a task is a run of A
// micro-panels against a chunk of B micro-panels that fits in one core's L2,
// and the micro-kernel multiplies one A micro-panel (L1 resident) by one B
// micro-panel into an MR×NR tile of C held in vector registers. Threads
// take items and tasks from a shared counter, so an uneven split or a thread
// the OS preempts costs one task, not a share. Edge tiles go through a small
// scratch tile, so no shape needs padding by the caller. Depth slices are
// equal (k = 896 runs as 2×448, not 512+384), since each slice is one pass
// over C.
//
// Register tiles: AVX-512 12×32 (24 zmm accumulators, broadcasts of A times
// two zmm of B), plus an 8×32 variant chosen for products of up to 96 rows
// when it pads fewer rows (64-query attention blocks); AVX2 6×16 (12 ymm);
// portable Go 2×4.
//
// Products with a transposed B and at most eight rows of op(A) (x·Wᵀ while
// decoding), or at most eight columns and A not transposed (a value head),
// skip packing: each element of C is a dot product of two contiguous rows,
// and a kernel streams four rows of the large operand against two rows of
// the small one (small.go; in assembly, or in Go at the generic tier,
// dotgo.go).
//
// The packed A micro-panel is read through two strides (bytes per k step,
// bytes per row), so a non-transposed A packs by plain row copies and a
// transposed A by plain k-row copies: neither needs a scalar transpose.
// Only a transposed B is transposed while packing, in 8×8 blocks with AVX.
//
// # Numerics
//
// Products are accumulated in float32 in k order within each KC block, so
// the error of each element is bounded by about k·eps·Σ|a||b| (eps = 2⁻²⁴),
// the usual bound for a float32 dot product. The order of the sums, and so
// the last bits, differ between tiers (16, 8 or 2 partial sums a row); within
// one tier a one-row product against bf16 weights (SgemmBF16TransB) gives
// the bits of the float32 product of the widened weights.
//
// # Errors
//
// There are no returned errors. A call whose dimensions or leading dimensions
// do not fit the slices it is given is a programmer's mistake and panics with
// a message that starts with "gemm:" and names the argument. When beta is 0,
// C is only written, never read, so it may hold NaN or Inf. Only C is
// overwritten; A and B are read-only.
package gemm
