//go:build !amd64

package gemm

func amxRunBF16(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxRunBF16NP(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxRunBF16AVX(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxStreamAVX(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxStreamTiles(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxStreamTilesPF(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr) {
	panic("gemm: no AMX kernel off amd64")
}

func amxStreamTilesAVX(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr) {
	panic("gemm: no AMX kernel off amd64")
}
