//go:build !amd64

package gemm

func amxBlockBF16(k32 int, b *uint16, ldb uintptr, act *uint16, out *float32, cfg *byte, next uintptr) {
	panic("gemm: no AMX kernel off amd64")
}
