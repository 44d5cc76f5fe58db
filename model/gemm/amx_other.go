//go:build !amd64

package gemm

func amxRunBF16(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxRunBF16NP(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr) {
	panic("gemm: no AMX kernel off amd64")
}
