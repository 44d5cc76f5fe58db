package gemm

// amxBlockBF16 is the AMX block kernel (amx_amd64.s, written by
// gen_amx.py); see amx.go.
//
//go:noescape
func amxBlockBF16(k32 int, b *uint16, ldb uintptr, act *uint16, out *float32, cfg *byte, next uintptr)

// amxRunBF16 and amxRunBF16T0 are the AMX run kernels (amx_amd64.s): nb
// blocks of B in one call; see amxRun.
//
//go:noescape
func amxRunBF16(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)

//go:noescape
func amxRunBF16T0(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)

//go:noescape
func amxRunBF16NP(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)
