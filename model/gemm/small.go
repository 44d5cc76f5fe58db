package gemm

// The few-rows path. Products with a transposed B and either at most
// smallRows rows of op(A) (x·Wᵀ while decoding a handful of tokens) or, with
// A not transposed, at most smallRows columns (a value head, n = 1) would
// pack a whole operand to use it a few times and waste most of the register
// tile on padding. Instead each element of C is a dot product of two
// contiguous rows, computed by an assembly kernel that streams four rows of
// the large operand against two rows of the small one. Kernels without a
// dot kernel take the packed path.

// smallRows is the most rows (or columns) the dot-product path takes: measured
// on 4864×896 weights, it is 1.6× faster than packing at 8 rows, even at 16
// and slower at 32.
const smallRows = 8

// dotKernel computes out[2r+i] = Σ_{p<k} a_i[p]·b_r[p] for four rows b_r of
// B, ldb bytes apart, and two rows a_0, a_1 of op(A); k is a multiple of the
// kernel's dotStep.
type dotKernel func(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)

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
	count   int         // rows of the wide operand
	narrow  [][]float32 // rows of the narrow operand
	wideIsA bool        // C[wide row][narrow row]; else C[narrow row][wide row]
	kv      int         // the kernel's part of each dot: k rounded down to dotStep
	dot     dotKernel
}

// small runs the dot-product path, split over groups of four wide rows.
func (e *Engine) small(j *job, threads int) {
	d := dotJob{job: j, dot: e.kern.dot, kv: j.k / e.kern.dotStep * e.kern.dotStep}
	if j.m <= smallRows {
		// Few rows of op(A) (decoding): B's rows are the wide operand. Rows of
		// op(A) must be contiguous: A's own rows, or a gathered copy of its
		// columns when A is transposed.
		d.wide, d.ld, d.count = j.b, j.ldb, j.n
		d.narrow = make([][]float32, j.m)
		if j.transA {
			buf := make([]float32, j.m*j.k)
			for i := range d.narrow {
				d.narrow[i] = buf[i*j.k : (i+1)*j.k]
				for p := range d.narrow[i] {
					d.narrow[i][p] = j.a[p*j.lda+i]
				}
			}
		} else {
			for i := range d.narrow {
				d.narrow[i] = j.a[i*j.lda : i*j.lda+j.k]
			}
		}
	} else {
		// Few columns (a value head, n = 1): A's rows are the wide operand.
		d.wide, d.ld, d.count, d.wideIsA = j.a, j.lda, j.m, true
		d.narrow = make([][]float32, j.n)
		for i := range d.narrow {
			d.narrow[i] = j.b[i*j.ldb : i*j.ldb+j.k]
		}
	}
	groups := ceilDiv(d.count, 4)
	per := max(16, ceilDiv(groups, 8*threads)) // groups of four wide rows per task
	forEach(threads, ceilDiv(groups, per), func(t int) {
		for g := t * per; g < min(groups, (t+1)*per); g++ {
			d.group(g * 4)
		}
	})
}

// group computes the dots of wide rows [w0, w0+4) (fewer at the end)
// against every narrow row.
func (d *dotJob) group(w0 int) {
	nw := min(4, d.count-w0)
	nn := len(d.narrow)
	var out [8]float32
	for i0 := 0; i0 < nn; i0 += 2 {
		a0, a1 := d.narrow[i0], d.narrow[min(i0+1, nn-1)]
		for r0 := 0; r0 < nw; {
			// Four distinct rows when there are four left; otherwise one row
			// at a time, repeated by a zero stride.
			width, ld := 4, uintptr(d.ld)*4
			if nw-r0 < 4 {
				width, ld = 1, 0
			}
			out = [8]float32{}
			if d.kv > 0 {
				d.dot(d.kv, &a0[0], &a1[0], &d.wide[(w0+r0)*d.ld], ld, &out)
			}
			for r := 0; r < width; r++ {
				w := w0 + r0 + r
				wrow := d.wide[w*d.ld : w*d.ld+d.k]
				for di, a := range [2][]float32{a0, a1} {
					i := i0 + di
					if i >= nn {
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
