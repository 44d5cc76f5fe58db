package gemm

// The few-rows path. With m ≤ smallRows and a transposed B (C = op(A)·Bᵀ,
// the form of every projection x·Wᵀ while decoding a handful of tokens),
// packing would copy all of B to use it for a few rows only, and the
// register tile would be mostly padding. Instead each element of C is a dot
// product of a row of op(A) and a row of B, both contiguous, computed four
// rows of B by two rows of op(A) at a time by an assembly kernel that
// streams B once. Kernels without a dot kernel take the packed path.

// smallRows is the most rows of op(A) the dot-product path takes: measured
// on 4864×896 weights, it is 1.6× faster than packing at 8 rows, even at 16
// and slower at 32.
const smallRows = 8

// dotKernel computes out[2r+i] = Σ_{p<k} a_i[p]·b_r[p] for four rows b_r of
// B, ldb bytes apart, and two rows a_0, a_1 of op(A); k is a multiple of the
// kernel's dotStep.
type dotKernel func(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)

func (e *Engine) useSmall(j *job) bool {
	return j.m <= smallRows && j.transB && e.kern.dot != nil
}

// small runs the dot-product path, split over groups of B rows.
func (e *Engine) small(j *job, threads int) {
	kn := e.kern
	// Rows of op(A), contiguous: A's own rows, or a gathered copy of its
	// columns when A is transposed.
	rows := make([][]float32, j.m)
	if j.transA {
		buf := make([]float32, j.m*j.k)
		for i := range rows {
			rows[i] = buf[i*j.k : (i+1)*j.k]
			for p := range rows[i] {
				rows[i][p] = j.a[p*j.lda+i]
			}
		}
	} else {
		for i := range rows {
			rows[i] = j.a[i*j.lda : i*j.lda+j.k]
		}
	}
	kv := j.k / kn.dotStep * kn.dotStep // the kernel's part of each dot
	groups := ceilDiv(j.n, 4)
	per := max(16, ceilDiv(groups, 8*threads)) // groups of four B rows per task
	forEach(threads, ceilDiv(groups, per), func(t int) {
		for g := t * per; g < min(groups, (t+1)*per); g++ {
			e.dotGroup(j, rows, kv, g*4)
		}
	})
}

// dotGroup computes C[:, j0:j0+4] (fewer at the right edge).
func (e *Engine) dotGroup(j *job, rows [][]float32, kv, j0 int) {
	nb := min(4, j.n-j0)
	var out [8]float32
	for i0 := 0; i0 < j.m; i0 += 2 {
		a0, a1 := rows[i0], rows[min(i0+1, j.m-1)]
		for r0 := 0; r0 < nb; {
			// Four distinct rows when there are four left; otherwise one row
			// at a time, repeated by a zero stride.
			width, ldb := 4, uintptr(j.ldb)*4
			if nb-r0 < 4 {
				width, ldb = 1, 0
			}
			out = [8]float32{}
			if kv > 0 {
				e.kern.dot(kv, &a0[0], &a1[0], &j.b[(j0+r0)*j.ldb], ldb, &out)
			}
			for r := 0; r < width; r++ {
				brow := j.b[(j0+r0+r)*j.ldb : (j0+r0+r)*j.ldb+j.k]
				for di, a := range [2][]float32{a0, a1} {
					i := i0 + di
					if i >= j.m {
						break
					}
					s := out[2*r+di]
					for p := kv; p < j.k; p++ {
						s += a[p] * brow[p]
					}
					ci := i*j.ldc + j0 + r0 + r
					if j.beta == 0 {
						j.c[ci] = j.alpha * s
					} else {
						j.c[ci] = j.alpha*s + j.beta*j.c[ci]
					}
				}
			}
			r0 += width
		}
	}
}
