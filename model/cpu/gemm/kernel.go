package gemm

import (
	"fmt"
	"unsafe"
)

// microKernel computes one MR×NR tile: acc = Σ_p a(r, p)·b(p, col) over
// p < kc, then c = alpha·acc + beta·c for the tile (c is not read when beta
// is 0). a(r, p) lives at byte offset p·sp + r·sr from a; b is a packed
// micro-panel of kc rows of NR floats; ldc is C's row pitch in bytes.
type microKernel func(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)

// kernel is one micro-kernel with its register tile and cache blocking.
type kernel struct {
	name  string
	mr    int // rows of the register tile (A values broadcast)
	nr    int // columns of the register tile (B values in vectors)
	kc    int // depth of a packed block
	nb    int // columns of op(B) one task sweeps (its packed panels fit in L2)
	nc    int // columns of a shared packed B block (sized for L3)
	mb    int // rows of a shared packed A block (sized for L3)
	micro microKernel
	// packBT packs a transposed B micro-panel (see packB); nil for the
	// portable loop.
	packBT func(nr int, b []float32, ldb, p0, kc, j0, cols int, dst []float32)
	// dot is the few-rows kernel (small.go), taking k in multiples of
	// dotStep; nil sends every product through the packed path.
	dot     dotKernel
	dotStep int
	// dot1 is dot for one row of op(A) at a time (same dotStep); nil pairs
	// a lone row with itself.
	dot1 dotKernel1
	// dot1BF16 is dot1 over bf16 rows of B, with dot1's arithmetic: the
	// bits of dot1 on the widened rows (SgemmBF16TransB); nil if none.
	dot1BF16 dotKernel1BF16
	// direct is micro for an A read in place (job.directA) that also
	// prefetches the next tile's rows of A; same arithmetic, same bits.
	// nil: micro.
	direct microKernel
	// narrow is a variant with fewer rows (same columns and packing of B)
	// for products of a few dozen rows; nil if none.
	narrow *kernel
	// tr8 transposes 8 × 8 blocks of float32 (transpose8AVX's contract);
	// nil for the portable loop.
	tr8 func(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int)
}

// forRows returns the variant to use for an m-row product: the narrow one
// when m is at most a few dozen rows and it pads fewer of them (64 rows are
// 8 panels of 8, but 6 panels of 12 with the last one a third full).
func (k *kernel) forRows(m int) *kernel {
	v := k.narrow
	if v == nil || m > 8*k.mr {
		return k
	}
	if ceilDiv(m, v.mr)*v.mr < ceilDiv(m, k.mr)*k.mr {
		return v
	}
	return k
}

// kernels lists the micro-kernels this CPU can run, fastest first. The
// portable Go kernel is always last.
var kernels = availableKernels()

var genericKernel = &kernel{
	name: "generic", mr: 2, nr: 4, kc: 256, nb: 512, nc: 2048, mb: 1024,
	micro: microGeneric, dot: dot4x2Go, dot1: dot4x1Go, dot1BF16: dot4x1BF16Go, dotStep: goDotStep,
}

// Kernels names the micro-kernels usable on this CPU, fastest first.
func Kernels() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}

func kernelNamed(name string) (*kernel, error) {
	for _, k := range kernels {
		if k.name == name {
			return k, nil
		}
	}
	return nil, fmt.Errorf("gemm: kernel %q not available on this CPU (have %v)", name, Kernels())
}

// microGeneric is the portable micro-kernel: a 2×4 tile in plain Go. Its
// eight sums are locals the compiler keeps in registers; the 4×8 tile it
// replaced kept them in an array on the stack (a load and a store per
// multiply-add), and a 4×4 or 2×8 tile of locals spilled on amd64's
// fifteen vector registers: 2.3-2.9 GFLOP/s a core against 0.5-1.3 for
// those, at 256×512×512 on the Zen 4 VM (shared, so the best of three).
func microGeneric(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	ap := unsafe.Pointer(a)
	bs := unsafe.Slice(b, kc*4)
	for p := 3; p < len(bs); p += 4 {
		bv := (*[4]float32)(bs[p-3 : p+1])
		a0 := *(*float32)(ap)
		a1 := *(*float32)(unsafe.Add(ap, sr))
		c00 += a0 * bv[0]
		c01 += a0 * bv[1]
		c02 += a0 * bv[2]
		c03 += a0 * bv[3]
		c10 += a1 * bv[0]
		c11 += a1 * bv[1]
		c12 += a1 * bv[2]
		c13 += a1 * bv[3]
		ap = unsafe.Add(ap, sp)
	}
	store := func(r uintptr, v0, v1, v2, v3 float32) {
		cv := (*[4]float32)(unsafe.Add(unsafe.Pointer(c), r*ldc))
		if beta == 0 {
			cv[0], cv[1], cv[2], cv[3] = alpha*v0, alpha*v1, alpha*v2, alpha*v3
		} else {
			cv[0], cv[1], cv[2], cv[3] = alpha*v0+beta*cv[0], alpha*v1+beta*cv[1], alpha*v2+beta*cv[2], alpha*v3+beta*cv[3]
		}
	}
	store(0, c00, c01, c02, c03)
	store(1, c10, c11, c12, c13)
}
