package cuda

import (
	"fmt"
	"unsafe"
)

// cuBLAS, loaded at run time like the driver: CUDA 13's libcublas.so.13
// first, then CUDA 12's. Only cublasGemmEx is needed: it takes the element
// type of each matrix and the compute type, so the same entry point serves
// float32 (with or without TF32 tensor cores) and bf16 inputs with float32
// accumulation. cublasSetWorkspace_v2 gives the handle a workspace of the
// Device's own (blasWorkspaceBytes).
type cublas struct {
	lib library

	cublasCreate, cublasDestroy, cublasSetStream, cublasGemmEx, cublasGetStatusName uintptr
	cublasSetWorkspace                                                              uintptr
}

var cublasNames = func() []string {
	return searchNames("R1GO_CUBLAS", "libcublas.so.13", "libcublas.so.12", "libcublas.so")
}

// cudaDataType and cublasComputeType_t values.
const (
	cudaR32F  = 0
	cudaR16BF = 14

	cublasCompute32F         = 68
	cublasCompute32FFastTF32 = 77
	cublasGemmDefault        = -1

	cublasOpN = 0
	cublasOpT = 1
)

func openCuBLAS(names []string) (*cublas, error) {
	for _, n := range names {
		preloadSiblings(n, "libcublasLt.so.*") // a wheel's libcublas needs its libcublasLt
	}
	lib, err := openFirst(names)
	if err != nil {
		return nil, fmt.Errorf("cuda: no cuBLAS library found (a GPU machine needs libcublas.so.13 or .12): %v", err)
	}
	b := &cublas{lib: lib}
	err = lib.bindAll([]binding{
		bind(&b.cublasCreate, "cublasCreate_v2"),
		bind(&b.cublasDestroy, "cublasDestroy_v2"),
		bind(&b.cublasSetStream, "cublasSetStream_v2"),
		bind(&b.cublasGemmEx, "cublasGemmEx"),
		bindOptional(&b.cublasGetStatusName, "cublasGetStatusName"),
		bindOptional(&b.cublasSetWorkspace, "cublasSetWorkspace_v2"),
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// blasWorkspaceBytes is the workspace a handle gets on a GPU of compute
// capability major: 32 MiB on Hopper and later, the cuBLAS documentation's
// recommendation there (PyTorch gives the same), 4 MiB before. A workspace
// set once keeps cuBLAS from allocating its own at a GEMM, which a
// captured graph must not do, and lets it pick the split-k kernels that
// need one.
func blasWorkspaceBytes(major int) int {
	if major >= 9 {
		return 32 << 20
	}
	return 4 << 20
}

// setWorkspace hands the handle bytes of device memory at p as its
// workspace. cublasSetStream resets it to cuBLAS's pool, so it comes after.
func (b *cublas) setWorkspace(handle, p uintptr, bytes int) error {
	return b.check(call(b.cublasSetWorkspace, handle, p, uintptr(bytes)), "cublasSetWorkspace_v2")
}

func (b *cublas) check(r int, what string) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: what, Code: r, Name: "cublasStatus_t"}
	if b.cublasGetStatusName != 0 {
		e.Name = cString(callPtr(b.cublasGetStatusName, uintptr(r)))
	}
	return e
}

// gemmArgs is one row-major Gemm of the Device seam restated for cuBLAS,
// which is column-major: a row-major [m,n] matrix is its column-major
// transpose, so C = op(A)·op(B) becomes Cᵀ = op(B)ᵀ·op(A)ᵀ, a column-major
// product of B then A with the operations kept and m, n swapped.
type gemmArgs struct {
	opA, opB          int // cuBLAS operations of the first and second operand
	m, n, k           int // column-major dimensions of the product
	first, second     uintptr
	ldFirst, ldSecond int
}

func rowMajorGemm(transA, transB bool, m, n, k int, a uintptr, lda int, b uintptr, ldb int) gemmArgs {
	op := func(t bool) int {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	return gemmArgs{opA: op(transB), opB: op(transA), m: n, n: m, k: k, first: b, ldFirst: ldb, second: a, ldSecond: lda}
}

// gemm runs one cublasGemmEx on float32 matrices.
func (b *cublas) gemm(handle uintptr, g gemmArgs, alpha float32, beta float32, c uintptr, ldc int, compute int) error {
	return b.gemmTyped(handle, g, cudaR32F, alpha, beta, c, cudaR32F, ldc, compute)
}

// gemmTyped runs one cublasGemmEx with inputs of type ab and output of
// type ct (cudaDataType values); alpha and beta are float32, as the
// float32 compute type requires.
func (b *cublas) gemmTyped(handle uintptr, g gemmArgs, ab int, alpha, beta float32, c uintptr, ct, ldc, compute int) error {
	algo := int64(cublasGemmDefault)
	r := call(b.cublasGemmEx, handle, uintptr(g.opA), uintptr(g.opB), uintptr(g.m), uintptr(g.n), uintptr(g.k),
		uintptr(unsafe.Pointer(&alpha)), g.first, uintptr(ab), uintptr(g.ldFirst), g.second, uintptr(ab), uintptr(g.ldSecond),
		uintptr(unsafe.Pointer(&beta)), c, uintptr(ct), uintptr(ldc), uintptr(compute), uintptr(algo))
	return b.check(r, "cublasGemmEx")
}
