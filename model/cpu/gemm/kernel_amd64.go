package gemm

import "github.com/r1go/r1go/internal/isa"

// Assembly micro-kernels (kernel_amd64.s); the argument list is microKernel's.

// micro12x32AVX512 holds a 12×32 tile in 24 zmm accumulators.
//
//go:noescape
func micro12x32AVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)

// micro8x32AVX512 is micro12x32AVX512 with 8 rows (16 accumulators).
//
//go:noescape
func micro8x32AVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)

// micro6x16AVX2 holds a 6×16 tile in 12 ymm accumulators.
//
//go:noescape
func micro6x16AVX2(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)

// micro12x32DirectAVX512 is micro12x32AVX512 for an A read in place,
// prefetching the next tile's 12 rows of A (direct_amd64.s).
//
//go:noescape
func micro12x32DirectAVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)

// dot4x2AVX512 and dot4x2AVX2 are the few-rows kernels (small_amd64.s).
//
//go:noescape
func dot4x2AVX512(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)

//go:noescape
func dot4x2AVX2(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)

// dot4x1AVX512 and dot4x1AVX2 are the one-row kernels (small_amd64.s).
//
//go:noescape
func dot4x1AVX512(k int, a, b *float32, ldb uintptr, out *[4]float32)

//go:noescape
func dot4x1AVX2(k int, a, b *float32, ldb uintptr, out *[4]float32)

var avx512Kernel = &kernel{
	name: "avx512", mr: 12, nr: 32, kc: 512, nb: 256, nc: 4096, mb: 3072,
	micro: micro12x32AVX512, direct: micro12x32DirectAVX512, packBT: packBTransAVX, tr8: transpose8AVX,
	dot: dot4x2AVX512, dot1: dot4x1AVX512, dot1BF16: dot4x1BF16AVX512, dotStep: 16,
	narrow: &kernel{
		name: "avx512", mr: 8, nr: 32, kc: 512, nb: 256, nc: 4096, mb: 3072,
		micro: micro8x32AVX512, packBT: packBTransAVX, tr8: transpose8AVX,
	},
}

var avx2Kernel = &kernel{
	name: "avx2", mr: 6, nr: 16, kc: 512, nb: 256, nc: 4096, mb: 3072,
	micro: micro6x16AVX2, packBT: packBTransAVX, tr8: transpose8AVX,
	dot: dot4x2AVX2, dot1: dot4x1AVX2, dot1BF16: dot4x1BF16AVX2, dotStep: 8,
}

func availableKernels() []*kernel {
	// The OS must save the upper register state too; x/sys/cpu folds the
	// XGETBV checks into these flags.
	var ks []*kernel
	if isa.X86.AVX512F {
		if !isa.X86.AVX512BW { // VPMOVZXWD on zmm
			avx512Kernel.dot1BF16 = nil
		}
		ks = append(ks, avx512Kernel)
	}
	if isa.X86.AVX2 && isa.X86.FMA {
		ks = append(ks, avx2Kernel)
	}
	return append(ks, genericKernel)
}
