package gemm

// amxBlockBF16 is the AMX block kernel (amx_amd64.s, written by
// gen_amx.py); see amx.go.
//
//go:noescape
func amxBlockBF16(k32 int, b *uint16, ldb uintptr, act *uint16, out *float32, cfg *byte, next uintptr)
