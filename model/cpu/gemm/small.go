package gemm

// The few-rows path. Products with a transposed B and either at most
// smallRows rows of op(A) (x·Wᵀ while decoding a handful of tokens) or, with
// A not transposed, at most smallRows columns (a value head, n = 1) would
// pack a whole operand to use it a few times and waste most of the register
// tile on padding. Instead each element of C is a dot product of two
// contiguous rows, computed by an assembly kernel that streams four rows of
// the large operand against two rows of the small one, or against one row
// when one is left (a single row is batch-1 decode, where pairing the row
// with a copy of itself would double the FMAs and the loads of A). Kernels
// without a dot kernel take the packed path.

// smallRows is the most rows (or columns) the dot-product path takes: measured
// on 4864×896 weights, it is 1.6× faster than packing at 8 rows, even at 16
// and slower at 32.
const smallRows = 8

// dotKernel computes out[2r+i] = Σ_{p<k} a_i[p]·b_r[p] for four rows b_r of
// B, ldb bytes apart, and two rows a_0, a_1 of op(A); k is a multiple of the
// kernel's dotStep.
type dotKernel func(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)

// dotKernel1 is dotKernel for a single row a of op(A): out[r] = Σ a[p]·b_r[p].
type dotKernel1 func(k int, a, b *float32, ldb uintptr, out *[4]float32)

// dotKernel1BF16 is dotKernel1 with B's rows stored as bf16, widened as they
// are read: out[r] = Σ a[p]·widen(b_r[p]).
type dotKernel1BF16 func(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)

func (e *Engine) useSmall(j *job) bool {
	if !j.transB || e.kern.dot == nil {
		return false
	}
	return j.m <= smallRows || (j.n <= smallRows && !j.transA)
}

// dotJob is the path's view of a product: every element of C is a dot
// product of a row of the wide operand (many rows, ld floats apart, streamed
// by the kernel four at a time) and a row of the narrow one (≤ smallRows
// rows, reused from L1).
type dotJob struct {
	*job
	wide    []float32
	ld      int
	count   int       // rows of the wide operand
	narrow  []float32 // rows of the narrow operand, nld floats apart
	nld     int
	nn      int  // rows of the narrow operand
	wideIsA bool // C[wide row][narrow row]; else C[narrow row][wide row]
	kv      int  // the kernel's part of each dot: k rounded down to dotStep
	dot     dotKernel
	dot1    dotKernel1
}

// small runs the dot-product path, split over groups of four wide rows.
func (e *Engine) small(j *job, threads int) {
	d := dotJob{job: j, dot: e.kern.dot, dot1: e.kern.dot1, kv: j.k / e.kern.dotStep * e.kern.dotStep}
	if j.m <= smallRows {
		// Few rows of op(A) (decoding): B's rows are the wide operand. Rows of
		// op(A) must be contiguous: A's own rows, or a gathered copy of its
		// columns when A is transposed.
		d.wide, d.ld, d.count, d.nn = j.b, j.ldb, j.n, j.m
		if j.transA && j.m > 1 {
			buf := make([]float32, j.m*j.k)
			for i := 0; i < j.m; i++ {
				for p := 0; p < j.k; p++ {
					buf[i*j.k+p] = j.a[p*j.lda+i]
				}
			}
			d.narrow, d.nld = buf, j.k
		} else if j.transA {
			// One row of op(A) is a column of A: contiguous only if lda is 1.
			if j.lda == 1 {
				d.narrow, d.nld = j.a, j.k
			} else {
				buf := make([]float32, j.k)
				for p := range buf {
					buf[p] = j.a[p*j.lda]
				}
				d.narrow, d.nld = buf, j.k
			}
		} else {
			d.narrow, d.nld = j.a, j.lda
		}
	} else {
		// Few columns (a value head, n = 1): A's rows are the wide operand.
		d.wide, d.ld, d.count, d.wideIsA = j.a, j.lda, j.m, true
		d.narrow, d.nld, d.nn = j.b, j.ldb, j.n
	}
	groups := ceilDiv(d.count, 4)
	per := max(16, ceilDiv(groups, 8*threads)) // groups of four wide rows per task
	forEach(threads, ceilDiv(groups, per), func(t int) {
		for g := t * per; g < min(groups, (t+1)*per); g++ {
			d.group(g * 4)
		}
	})
}

// row returns narrow row i (k floats).
func (d *dotJob) row(i int) []float32 { return d.narrow[i*d.nld : i*d.nld+d.k] }

// group computes the dots of wide rows [w0, w0+4) (fewer at the end)
// against every narrow row.
func (d *dotJob) group(w0 int) {
	nw := min(4, d.count-w0)
	var out [8]float32
	for i0 := 0; i0 < d.nn; i0 += 2 {
		one := i0+1 == d.nn && d.dot1 != nil // the last row, unpaired
		a0, a1 := d.row(i0), d.row(min(i0+1, d.nn-1))
		for r0 := 0; r0 < nw; {
			// Four distinct rows when there are four left; otherwise one row
			// at a time, repeated by a zero stride.
			width, ld := 4, uintptr(d.ld)*4
			if nw-r0 < 4 {
				width, ld = 1, 0
			}
			out = [8]float32{}
			if d.kv > 0 {
				b := &d.wide[(w0+r0)*d.ld]
				if one {
					// out[r] for the single row; spread to out[2r] below.
					var o1 [4]float32
					d.dot1(d.kv, &a0[0], b, ld, &o1)
					out[0], out[2], out[4], out[6] = o1[0], o1[1], o1[2], o1[3]
				} else {
					d.dot(d.kv, &a0[0], &a1[0], b, ld, &out)
				}
			}
			for r := 0; r < width; r++ {
				w := w0 + r0 + r
				wrow := d.wide[w*d.ld : w*d.ld+d.k]
				for di, a := range [2][]float32{a0, a1} {
					i := i0 + di
					if i >= d.nn {
						break
					}
					s := out[2*r+di]
					for p := d.kv; p < d.k; p++ {
						s += a[p] * wrow[p]
					}
					ci := i*d.ldc + w
					if d.wideIsA {
						ci = w*d.ldc + i
					}
					if d.beta == 0 {
						d.c[ci] = d.alpha * s
					} else {
						d.c[ci] = d.alpha*s + d.beta*d.c[ci]
					}
				}
			}
			r0 += width
		}
	}
}
