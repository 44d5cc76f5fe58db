package gemm

import (
	"sync"
	"unsafe"
)

// Packed layouts (all float32 offsets within one micro-panel):
//
//	A, not transposed: a(r, p) at r·kcs + p   (rows copied whole; kcs = kc + pad)
//	A, transposed:     a(r, p) at p·MR + r    (k-rows copied whole)
//	B, either:         b(p, j) at p·NR + j
//
// Rows or columns past the matrix edge are zero-filled, so the micro-kernel
// always runs a full tile.

// kcStride is the row pitch of a non-transposed A micro-panel: kc rounded up
// to a cache line plus one more line, so the MR rows of a panel do not all
// land in the same L1 sets when kc is a power of two.
func kcStride(kc int) int { return (kc+15)&^15 + 16 }

// aStrides returns the micro-kernel's byte strides (per k step, per row) for
// a packed A micro-panel.
func aStrides(transA bool, mr, kcs int) (sp, sr uintptr) {
	if transA {
		return uintptr(mr) * 4, 4
	}
	return 4, uintptr(kcs) * 4
}

// packA packs rows [i0, i0+rows) × depth [p0, p0+kc) of op(A) into one
// micro-panel dst of mr·kcs floats; rows ≤ mr.
func packA(transA bool, mr int, a []float32, lda, i0, rows, p0, kc, kcs int, dst []float32) {
	if !transA {
		for r := 0; r < rows; r++ {
			copy(dst[r*kcs:r*kcs+kc], a[(i0+r)*lda+p0:])
		}
		for r := rows; r < mr; r++ {
			clear(dst[r*kcs : r*kcs+kc])
		}
		return
	}
	if rows == mr {
		switch mr {
		case 12:
			for p := 0; p < kc; p++ {
				*(*[12]float32)(dst[p*12:]) = *(*[12]float32)(a[(p0+p)*lda+i0:])
			}
			return
		case 6:
			for p := 0; p < kc; p++ {
				*(*[6]float32)(dst[p*6:]) = *(*[6]float32)(a[(p0+p)*lda+i0:])
			}
			return
		case 4:
			for p := 0; p < kc; p++ {
				*(*[4]float32)(dst[p*4:]) = *(*[4]float32)(a[(p0+p)*lda+i0:])
			}
			return
		}
	}
	for p := 0; p < kc; p++ {
		d := dst[p*mr : p*mr+mr]
		copy(d, a[(p0+p)*lda+i0:(p0+p)*lda+i0+rows])
		clear(d[rows:])
	}
}

// packB packs depth [p0, p0+kc) × columns [j0, j0+cols) of op(B) into one
// micro-panel dst of kc·nr floats for kernel kn; cols ≤ nr.
func packB(kn *kernel, transB bool, b []float32, ldb, p0, kc, j0, cols int, dst []float32) {
	nr := kn.nr
	if !transB {
		for p := 0; p < kc; p++ {
			d := dst[p*nr : p*nr+nr]
			copy(d, b[(p0+p)*ldb+j0:(p0+p)*ldb+j0+cols])
			clear(d[cols:])
		}
		return
	}
	if kn.packBT != nil {
		kn.packBT(nr, b, ldb, p0, kc, j0, cols, dst)
	} else {
		packBTransGo(nr, b, ldb, p0, kc, j0, 0, cols, dst)
	}
	if cols < nr {
		for p := 0; p < kc; p++ {
			clear(dst[p*nr+cols : p*nr+nr])
		}
	}
}

// packBTransGo packs columns [jlo, cols) of a transposed B (stored n×k: column
// j of op(B) is row j0+j of B) into micro-panel dst, leaving other columns.
func packBTransGo(nr int, b []float32, ldb, p0, kc, j0, jlo, cols int, dst []float32) {
	// Four columns at a time keeps the scattered writes within a few cache
	// lines per k step.
	j := jlo
	for ; j+4 <= cols; j += 4 {
		s0 := b[(j0+j)*ldb+p0 : (j0+j)*ldb+p0+kc]
		s1 := b[(j0+j+1)*ldb+p0 : (j0+j+1)*ldb+p0+kc]
		s2 := b[(j0+j+2)*ldb+p0 : (j0+j+2)*ldb+p0+kc]
		s3 := b[(j0+j+3)*ldb+p0 : (j0+j+3)*ldb+p0+kc]
		d := dst[j:]
		for p := range s0 {
			q := (*[4]float32)(d[p*nr:])
			q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; j < cols; j++ {
		s := b[(j0+j)*ldb+p0 : (j0+j)*ldb+p0+kc]
		for p, v := range s {
			dst[p*nr+j] = v
		}
	}
}

// A scratch buffer whose data starts on a 64-byte boundary, so packed
// micro-panels line up with cache lines and zmm loads.
type scratch struct {
	raw  []float32
	off  int // raw[off] is the first 64-byte aligned element
	data []float32
}

// Packed A blocks and packed B blocks have their own pools: with one pool a
// call would often draw the other kind's (smaller) buffer, drop it and
// allocate, which for small products costs more than the product.
var aScratch, bScratch sync.Pool

func getScratch(pool *sync.Pool, n int) *scratch {
	s, _ := pool.Get().(*scratch)
	if s == nil || len(s.raw) < n+16 {
		s = &scratch{raw: make([]float32, n+16)}
		for uintptr(unsafe.Pointer(&s.raw[s.off]))%64 != 0 {
			s.off++
		}
	}
	s.data = s.raw[s.off : s.off+n]
	return s
}

func putScratch(pool *sync.Pool, s *scratch) { pool.Put(s) }

// transpose8Go is transpose8AVX's contract in Go, for CPUs without AVX:
// block i moves src's 8 rows (lds bytes apart) × columns [8i, 8i+8) to
// dst's rows [8i, 8i+8) (ldd bytes apart) × 8 columns, bits unchanged.
func transpose8Go(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int) {
	for i := 0; i < blocks; i++ {
		for r := uintptr(0); r < 8; r++ {
			s := (*[8]float32)(unsafe.Add(unsafe.Pointer(src), r*lds+uintptr(32*i)))
			for c := uintptr(0); c < 8; c++ {
				(*[8]float32)(unsafe.Add(unsafe.Pointer(dst), (uintptr(8*i)+c)*ldd))[r] = s[c]
			}
		}
	}
}
