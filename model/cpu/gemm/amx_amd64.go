package gemm

// amxRunBF16 and amxRunBF16NP are the AMX run kernels (amx_amd64.s, written
// by gen_amx.py): nb blocks a call, asking for the next block of the
// streamed operand into L2 as they go, or not; see amx.go.
//
//go:noescape
func amxRunBF16(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr)

//go:noescape
func amxRunBF16NP(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr)

// amxRunBF16AVX is amxRunBF16 reading the next block with AVX-512 loads
// instead of prefetching it (R1GO_AMX_STREAM=avx).
//
//go:noescape
func amxRunBF16AVX(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr)

// amxStreamAVX, amxStreamTiles, amxStreamTilesPF and amxStreamTilesAVX
// (amx_amd64.s) read a stream of 2 KiB steps the ways BenchmarkAMXStream
// compares, with no arithmetic.
//
//go:noescape
func amxStreamAVX(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)

//go:noescape
func amxStreamTiles(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)

//go:noescape
func amxStreamTilesPF(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)

//go:noescape
func amxStreamTilesAVX(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)
