package gemm

// transpose8AVX transposes 8×8 blocks of float32 (pack_amd64.s).
//
//go:noescape
func transpose8AVX(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int)

// packBTransAVX is packB for a transposed B with AVX: 8 columns × 8 k steps
// per block transpose, the ragged rest by the Go loop.
func packBTransAVX(nr int, b []float32, ldb, p0, kc, j0, cols int, dst []float32) {
	blocks := kc / 8
	j := 0
	if blocks > 0 {
		for ; j+8 <= cols; j += 8 {
			src := b[(j0+j)*ldb+p0 : (j0+j+7)*ldb+p0+blocks*8] // bounds for all 8 rows
			d := dst[j : (blocks*8-1)*nr+j+8]
			transpose8AVX(&src[0], uintptr(ldb)*4, &d[0], uintptr(nr)*4, blocks)
		}
	}
	// Columns j.. for every k, and k from blocks·8 on for the columns done
	// above.
	packBTransGo(nr, b, ldb, p0, kc, j0, j, cols, dst)
	if blocks*8 < kc && j > 0 {
		packBTransGo(nr, b, ldb, p0+blocks*8, kc-blocks*8, j0, 0, j, dst[blocks*8*nr:])
	}
}
