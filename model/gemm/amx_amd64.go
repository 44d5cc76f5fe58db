package gemm

// amxRunBF16 and amxRunBF16NP are the AMX run kernels (amx_amd64.s, written
// by gen_amx.py): nb blocks of B a call, asking for the next block into L2
// as they go, or not; see amx.go.
//
//go:noescape
func amxRunBF16(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)

//go:noescape
func amxRunBF16NP(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)
