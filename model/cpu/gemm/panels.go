package gemm

import "unsafe"

// The broadcast form of the bf16 dot product, for decode batches. The
// tile kernel (dotTileBF16) sums each of its 16 outputs across the 16
// lanes of a vector and folds the lanes together at the end of every
// tile: at k = 896 the fold is an eighth of the work, and its 4 × 4 tile
// reads both operands from L2 once per 16 products. Here a vector's 16
// lanes are 16 rows of A instead: A is packed in pairs (for each depth
// pair, every row's two bf16 values side by side, one 32-bit lane each),
// and each VDPBF16PS multiplies one pair of a weight row, broadcast from
// memory where it lies, by 16 rows' pairs. Eight weight rows against 32
// rows of A are 16 accumulators with nothing to fold: the sums come out
// as a block of Cᵀ, which the 8 × 8 transpose writes into C. The weights
// are read in place, start to end, once per product.
//
// Each output is its lane's sum over the depth pairs in order, an
// ordering of its own (the contract is SgemmDotBF16TransB's: A rounded to
// bf16, products summed in float32).

const (
	// panelRows is the kernels' panel: rows of B per block of sums.
	panelRows = 8
	// panelMaxRows bounds the batches that take the broadcast form:
	// every run of weights passes all of A's packed blocks, which beyond
	// two blocks of 32 outgrow L2 beside the run; prefill and scoring
	// keep the tile kernel and its blocking of A.
	panelMaxRows = 64
	// panelRunBytes bounds a task's run of B rows between two passes of
	// A's blocks: the run stays in L2 while each block passes it.
	panelRunBytes = 256 << 10
)

// usePanels says whether m rows of A take the broadcast form: when the
// last block of rows fills at least 25/32 of its vectors' lanes (13 of
// 16, 25 of 32). Empty lanes are wasted multiply-adds, and the tile
// kernel (four rows a tile) wastes none: on this project's Zen 4, 2
// threads, the gate-up and down products of Qwen2.5-0.5B's decode ran
// 1.05-1.55 × the tile kernel's speed at 16, 32 and 64 rows, about even
// (0.93 and 1.1 ×) at 28, and the gate-up product 0.6-0.8 × at 8, 12, 20
// and 24 (BenchmarkDotBF16Rows, benchmarks/README.md).
func usePanels(m int) bool {
	last := (m-1)%32 + 1
	return m >= 13 && m <= panelMaxRows && 32*last >= 25*panelLanes(last)
}

// dotForce sends every product to one kernel, "panels" (up to
// panelMaxRows rows) or "tiles", instead of bf16Kernel's choice (tests,
// benchmarks: the vector kernels beside the tile unit in the same run).
var dotForce string

// bf16Kernel picks the product's kernel for m rows of A: the tile unit
// where it is on, else the broadcast panels where usePanels says so, else
// the four-row tiles; dotForce overrides.
func bf16Kernel(m int) string {
	switch dotForce {
	case "panels":
		if m <= panelMaxRows {
			return "panels"
		}
		return "tiles"
	case "tiles":
		return "tiles"
	}
	if on, _ := HasAMX(); on {
		return "amx"
	}
	if usePanels(m) {
		return "panels"
	}
	return "tiles"
}

// dotPanels is the broadcast path's product from the rounded rows a16 (k
// apart, padded with zero rows to a multiple of 8), for m ≤ panelMaxRows.
func dotPanels(m, n, k int, alpha float32, a16, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	blocks := ceilDiv(m, 32)
	pk := getDotScratch(blocks * 32 * k)
	defer putDotScratch(pk)
	for q := 0; q < blocks; q++ {
		rows := min(32, m-32*q)
		packPairs(a16[32*q*k:], k, rows, panelLanes(rows), (*pk)[32*q*k:])
	}
	full := n / panelRows
	run := max(1, panelRunBytes/(panelRows*2*k))
	starts := guidedTasks(full, threads, run)
	forEach(threads, len(starts)-1, func(t int) {
		ob := getScratch(&dotOut, run*panelRows*32)
		defer putScratch(&dotOut, ob)
		for p := starts[t]; p < starts[t+1]; p += run {
			np := min(run, starts[t+1]-p)
			panelRun(m, k, alpha, (*pk)[:blocks*32*k], b[p*panelRows*ldb:], ldb, np, np*panelRows, beta, c, ldc, p*panelRows, ob.data)
		}
	})
	if tail := n - full*panelRows; tail > 0 {
		// The last rows of B padded with zero rows to a panel.
		pad := getDotScratch(panelRows * k)
		defer putDotScratch(pad)
		bt := *pad
		for r := 0; r < panelRows; r++ {
			row := bt[r*k : (r+1)*k]
			if r < tail {
				copy(row, b[(full*panelRows+r)*ldb:][:k])
			} else {
				clear(row)
			}
		}
		ob := getScratch(&dotOut, panelRows*32)
		defer putScratch(&dotOut, ob)
		panelRun(m, k, alpha, (*pk)[:blocks*32*k], bt, k, 1, tail, beta, c, ldc, full*panelRows, ob.data)
	}
}

// panelRun computes C's columns [j0, j0+cols) from np panels of B (bt,
// ldb apart) for every block of the packed rows pk, through out.
func panelRun(m, k int, alpha float32, pk, bt []uint16, ldb, np, cols int, beta float32, c []float32, ldc, j0 int, out []float32) {
	for q := 0; q*32 < m; q++ {
		rows := min(32, m-32*q)
		lanes := panelLanes(rows)
		kern := dotPanelsBF16x32
		if lanes == 16 {
			kern = dotPanelsBF16x16
		}
		kern(k/32, np, &bt[0], uintptr(2*ldb), &pk[32*q*k], &out[0])
		storeCT(out, lanes, cols, 32*q, rows, j0, alpha, beta, c, ldc)
	}
}

// panelLanes is the kernel for a block of rows of A: 16 lanes or 32.
func panelLanes(rows int) int {
	if rows <= 16 {
		return 16
	}
	return 32
}

// packPairs writes rows [0, rows) of the bf16 matrix a16 (k values each,
// k apart, padded with zero rows to a multiple of 8) into dst in pairs:
// dst's 32-bit lane p·lanes + i holds row i's values at depth 2p and
// 2p+1, rows from rows to lanes zero. A bf16 pair is 32 bits, so this is
// the transpose of a [rows][k/2] matrix of 32-bit words (blockTr8: every
// CPU with the dot kernels has it).
func packPairs(a16 []uint16, k, rows, lanes int, dst []uint16) {
	kp := k / 2
	dst = dst[:kp*lanes*2]
	g8 := ceilDiv(rows, 8)
	_ = a16[8*g8*k-1]
	for g := 0; g < g8; g++ {
		// Eight rows of words are eight rows of "floats": the transpose
		// moves their bits unchanged.
		blockTr8((*float32)(unsafe.Pointer(&a16[8*g*k])), uintptr(2*k), (*float32)(unsafe.Pointer(&dst[16*g])), uintptr(4*lanes), kp/8)
	}
	if 8*g8 < lanes {
		for p := 0; p < kp; p++ {
			clear(dst[2*(p*lanes+8*g8) : 2*(p+1)*lanes])
		}
	}
}

// storeCT writes a block of Cᵀ into C: out holds cols rows (B's) of lanes
// sums each, row r's sum i being C[i0+i][j0+r] for i < rows; C = alpha·out
// + beta·C (beta 0: C is not read). A plain product's rows of C go eight
// at a time through the 8 × 8 transpose, the rest one by one.
func storeCT(out []float32, lanes, cols, i0, rows, j0 int, alpha, beta float32, c []float32, ldc int) {
	n8 := 0
	if alpha == 1 && beta == 0 && blockTr8 != nil && cols >= 8 {
		if n8 = rows / 8; n8 > 0 {
			_ = c[(i0+8*n8-1)*ldc+j0+cols/8*8-1] // the rows and columns written
			for q := 0; q+8 <= cols; q += 8 {
				blockTr8(&out[q*lanes], uintptr(4*lanes), &c[i0*ldc+j0+q], uintptr(4*ldc), n8)
			}
		}
	}
	for i := 0; i < rows; i++ {
		cr := c[(i0+i)*ldc+j0:][:cols]
		r0 := 0
		if i < 8*n8 {
			r0 = cols / 8 * 8 // the transposes wrote these
		}
		for r := r0; r < cols; r++ {
			cr[r] = scaleSum(out[r*lanes+i], alpha, beta, cr[r])
		}
	}
}
