//go:build !amd64

package gemm

func amxBlockBF16(k32 int, b *uint16, ldb uintptr, act *uint16, out *float32, cfg *byte) {
	panic("gemm: no AMX kernel off amd64")
}

var amxTr8 func(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int)
