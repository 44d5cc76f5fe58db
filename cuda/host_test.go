package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// Tests of the host-side logic that needs no GPU: parameter packing, the
// row-major to column-major GEMM mapping, attention tiles, the KV-cache
// plan, the LM head geometry and bf16 conversion.

func TestArgPacking(t *testing.T) {
	var a argPack
	args := []uint64{argPtr(0xdeadbeef00), argInt(-3), argInt64(-5), argFloat(1.5), argInt(7)}
	ptrs := a.pack(args)
	if len(ptrs) != len(args) {
		t.Fatalf("%d pointers for %d args", len(ptrs), len(args))
	}
	// Each pointer must address its own slot of a.slots.
	slot := func(k int) []byte {
		if ptrs[k] != uintptr(unsafe.Pointer(&a.slots[k])) {
			t.Fatalf("pointer %d does not address slot %d", k, k)
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.slots[k])), 8)
	}
	if got := binary.LittleEndian.Uint64(slot(0)); got != 0xdeadbeef00 {
		t.Errorf("pointer slot holds %#x", got)
	}
	// The driver copies 4 bytes for an int or float parameter.
	if got := int32(binary.LittleEndian.Uint32(slot(1))); got != -3 {
		t.Errorf("int slot reads %d, want -3", got)
	}
	if got := int64(binary.LittleEndian.Uint64(slot(2))); got != -5 {
		t.Errorf("long long slot reads %d, want -5", got)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(slot(3))); got != 1.5 {
		t.Errorf("float slot reads %v, want 1.5", got)
	}
	// Packing again reuses the slots without leaking the old values.
	ptrs = a.pack([]uint64{argInt(9)})
	if len(ptrs) != 1 || int32(binary.LittleEndian.Uint32(slot(0))) != 9 {
		t.Errorf("repacked slot reads %d", int32(binary.LittleEndian.Uint32(slot(0))))
	}
	defer func() {
		if recover() == nil {
			t.Error("argInt(1<<40) did not panic: a C int cannot hold it")
		}
	}()
	argInt(1 << 40)
}

// colMajorGemm is the BLAS definition of GEMM for column-major matrices:
// C[i + j·ldc] = alpha·Σ_p op(A)[i,p]·op(B)[p,j] + beta·C.
func colMajorGemm(opA, opB, m, n, k int, alpha float32, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	at := func(X []float32, ld, op, r, c int) float64 {
		if op == cublasOpN {
			return float64(X[r+c*ld])
		}
		return float64(X[c+r*ld])
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for q := 0; q < k; q++ {
				s += at(A, lda, opA, i, q) * at(B, ldb, opB, q, j)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(C[i+j*ldc])
			}
			C[i+j*ldc] = float32(v)
		}
	}
}

// TestRowMajorGemmMapping checks that the arguments handed to cuBLAS, read
// with column-major BLAS semantics, compute the row-major product the CPU
// device computes, for every transpose combination and padded strides.
func TestRowMajorGemmMapping(t *testing.T) {
	cpu := cpu.New()
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	for trial := 0; trial < 40; trial++ {
		transA, transB := trial&1 == 1, trial&2 == 2
		m, n, k := 1+rng.IntN(9), 1+rng.IntN(9), 1+rng.IntN(9)
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+rng.IntN(3), bc+rng.IntN(3), n+rng.IntN(3)
		A, B, C := randSlice(rng, ar*lda), randSlice(rng, br*ldb), randSlice(rng, m*ldc)
		alpha, beta := float32(rng.NormFloat64()), float32(rng.IntN(2))
		want := upload(cpu, C)
		cpu.Gemm(transA, transB, m, n, k, alpha, upload(cpu, A), lda, upload(cpu, B), ldb, beta, want, ldc)
		const addrA, addrB = 1, 2
		g := rowMajorGemm(transA, transB, m, n, k, addrA, lda, addrB, ldb)
		mats := map[uintptr][]float32{addrA: A, addrB: B}
		got := slices.Clone(C)
		colMajorGemm(g.opA, g.opB, g.m, g.n, g.k, alpha, mats[g.first], g.ldFirst, mats[g.second], g.ldSecond, beta, got, ldc)
		if e := relErr(got, download(cpu, want)); e > 1e-6 {
			t.Fatalf("transA=%v transB=%v m=%d n=%d k=%d: cuBLAS arguments give relative error %.3g", transA, transB, m, n, k, e)
		}
	}
}

func TestCheckGemmBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a 2x3 a with lda 3 in 5 values did not panic")
		}
	}()
	checkGemm(false, false, 2, 2, 3, 5, 3, 6, 2, 4, 2)
}

// TestQueryTiles checks the tiles against the definition of causal packed
// attention: every query row appears in exactly one tile, and row r of a
// tile sees exactly the keys from its sequence's start up to itself.
func TestQueryTiles(t *testing.T) {
	for _, seqs := range [][]int32{{0, 1}, {0, 8}, {0, 9}, {0, 5, 6, 40, 67}, {0, 33, 33 + 64, 33 + 64 + 17}} {
		T := int(seqs[len(seqs)-1])
		seen := make([]int, T)
		tiles := queryTiles(seqs)
		for k := 0; k < len(tiles); k += 4 {
			q0, nq, k0, kc0 := tiles[k], tiles[k+1], tiles[k+2], tiles[k+3]
			if nq < 1 || nq > attnRows {
				t.Fatalf("seqs %v: tile with %d rows", seqs, nq)
			}
			for r := int32(0); r < nq; r++ {
				row := q0 + r
				seen[row]++
				s0 := seqs[seqStartIndex(seqs, row)]
				if k0 != s0 || kc0+r != row-s0+1 {
					t.Fatalf("seqs %v: row %d sees keys [%d, %d), want [%d, %d]", seqs, row, k0, k0+kc0+r, s0, row)
				}
			}
		}
		for row, c := range seen {
			if c != 1 {
				t.Fatalf("seqs %v: row %d in %d tiles", seqs, row, c)
			}
		}
		kt := keyTiles(seqs)
		seen = make([]int, T)
		for k := 0; k < len(kt); k += 4 {
			for r := kt[k]; r < kt[k]+kt[k+1]; r++ {
				seen[r]++
				if e := seqs[seqStartIndex(seqs, r)+1]; kt[k+2] != e {
					t.Fatalf("seqs %v: key row %d has sequence end %d, want %d", seqs, r, kt[k+2], e)
				}
			}
		}
		for row, c := range seen {
			if c != 1 {
				t.Fatalf("seqs %v: key row %d in %d tiles", seqs, row, c)
			}
		}
	}
}

func seqStartIndex(seqs []int32, t int32) int {
	for j := 0; j+1 < len(seqs); j++ {
		if seqs[j] <= t && t < seqs[j+1] {
			return j
		}
	}
	return -1
}

// TestPlanCached checks the cache rows and tiles of a mixed prefill and
// decode step against their definition.
func TestPlanCached(t *testing.T) {
	slots, pos0, lens := []int32{3, 0, 5}, []int32{0, 17, 4}, []int32{11, 1, 2}
	maxLen := 32
	pl := planCached(slots, pos0, lens, maxLen, 14)
	row := 0
	for j := range lens {
		for i := 0; i < int(lens[j]); i++ {
			if want := int(slots[j])*maxLen + int(pos0[j]) + i; int(pl.dst[row]) != want {
				t.Fatalf("row %d goes to cache row %d, want %d", row, pl.dst[row], want)
			}
			row++
		}
	}
	if pl.decode {
		t.Error("a step with a 11-token chunk is marked as a decode step")
	}
	for r := 0; r < 14; r++ {
		if pl.rows[2*r] != pl.dst[r]-(pl.dst[r]%int32(maxLen)) || pl.rows[2*r+1] != pl.dst[r]%int32(maxLen)+1 {
			t.Fatalf("decode row %d: (%d, %d) for cache row %d", r, pl.rows[2*r], pl.rows[2*r+1], pl.dst[r])
		}
	}
	if !planCached([]int32{1, 0}, []int32{5, 9}, []int32{1, 1}, maxLen, 2).decode {
		t.Error("a step of one-token chunks is not marked as a decode step")
	}
	covered := map[int32]int32{} // packed row → keys it sees
	for k := 0; k < len(pl.tiles); k += 4 {
		for r := int32(0); r < pl.tiles[k+1]; r++ {
			covered[pl.tiles[k]+r] = pl.tiles[k+3] + r
			if (pl.tiles[k+2])%int32(maxLen) != 0 {
				t.Fatalf("tile %v does not start at a slot", pl.tiles[k:k+4])
			}
		}
	}
	// Row t of chunk j sees cache positions [0, pos0[j] + i].
	want := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 18, 5, 6}
	for r, w := range want {
		if covered[int32(r)] != w {
			t.Fatalf("row %d sees %d keys, want %d", r, covered[int32(r)], w)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a chunk past the cache length did not panic")
		}
	}()
	planCached([]int32{0}, []int32{30}, []int32{3}, maxLen, 3)
}

func TestHeadGeometry(t *testing.T) {
	for _, c := range []struct{ T, V int }{{1, 17}, {16, 151936}, {5000, 151936}, {100000, 151936}, {3, 50}} {
		rows, chunk := headGeometry(c.T, c.V)
		if rows < 1 || rows > c.T || rows > headMaxRows || chunk < 1 || chunk > c.V {
			t.Fatalf("T=%d V=%d: rows %d chunk %d", c.T, c.V, rows, chunk)
		}
		if rows*chunk > max(headLogitBudget, 128*rows) {
			t.Fatalf("T=%d V=%d: a %dx%d logit block exceeds the budget", c.T, c.V, rows, chunk)
		}
	}
}

// bf16Nearest is an independent reference: the bf16 value nearest to f
// (ties to the even mantissa), found by comparing the two neighbours in
// float64. Past the largest finite bf16 the next neighbour is Inf, which
// IEEE rounding treats as the value 2^128 of a virtual next binade.
func bf16Nearest(f float32) uint16 {
	if math.IsNaN(float64(f)) {
		return 0x7fc0
	}
	if math.IsInf(float64(f), 0) {
		return uint16(math.Float32bits(f) >> 16)
	}
	value := func(h uint16) float64 {
		if h&0x7fff == 0x7f80 {
			return math.Copysign(math.Ldexp(1, 128), float64(f))
		}
		return float64(bf16.ToFloat32(h))
	}
	lo := uint16(math.Float32bits(f) >> 16) // truncation, toward zero
	hi := lo + 1
	dl, dh := math.Abs(float64(f)-value(lo)), math.Abs(float64(f)-value(hi))
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

func TestBF16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
	cases := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.00390625, 1.01171875, 3.4e38, -3.4e38, 1e-40, -1e-45,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000)}
	for k := 0; k < 200000; k++ {
		cases = append(cases, math.Float32frombits(rng.Uint32()))
	}
	for _, c := range cases {
		got := bf16.FromFloat32(c)
		if math.IsNaN(float64(c)) {
			if !math.IsNaN(float64(bf16.ToFloat32(got))) {
				t.Fatalf("NaN %#x became %#x", math.Float32bits(c), got)
			}
			continue
		}
		if want := bf16Nearest(c); got != want {
			t.Fatalf("bf16(%g = %#x) = %#x, nearest is %#x", c, math.Float32bits(c), got, want)
		}
	}
	// Exactness of the way back, and the bound the GPU tests rely on:
	// |bf16(x) − x| ≤ 2^−8·|x| for normal x (8 significant bits).
	for k := 0; k < 10000; k++ {
		x := float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*5))
		if r := bf16.Round(x); math.Abs(float64(r-x)) > math.Ldexp(math.Abs(float64(x)), -8) {
			t.Fatalf("bf16 rounding of %g is %g, off by more than 2^-8 relative", x, r)
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func upload(d model.Device, x []float32) model.Buffer {
	b := d.Alloc(len(x))
	d.Upload(b, x)
	return b
}

func download(d model.Device, b model.Buffer) []float32 {
	x := make([]float32, b.Len())
	d.Download(x, b)
	return x
}

// relErr is max|got − want| / max|want|, NaN when got has a NaN.
func relErr(got, want []float32) float64 {
	var diff, scale float64
	for i := range want {
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			return math.NaN()
		}
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return diff / math.Max(scale, 1e-30)
}
