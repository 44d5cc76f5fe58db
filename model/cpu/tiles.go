package cpu

import (
	"fmt"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// A rollout copy's weight matrices in the tile layout (model.BF16Products:
// ProductMatrix; Copy packs). On a CPU whose bf16 products run on AMX
// tiles, each matrix that is the B of a product keeps gemm's tile layout
// (gemm.SgemmTileBF16TransB): the tile unit reads it as one stream and
// writes rows of C with no transpose, for the same bits as the same matrix
// in rows. Only a float32 A·Bᵀ product (Gemm) and a row lookup
// (Embedding, for a tied LM head) read such a view.

// bf16TileBuf is a weight matrix of n rows of k values in gemm's tile
// layout, a view of a bf16DotBuf arena.
type bf16TileBuf struct {
	bits []uint16
	n, k int
}

func (b bf16TileBuf) Len() int { return len(b.bits) }

// Slice takes rows of the matrix: from the start of a block of 32 rows,
// whole blocks or everything to the end (the LM head's chunks of the
// vocabulary).
func (b bf16TileBuf) Slice(off, n int) model.Buffer {
	block := 32 * b.k
	full := b.n / 32 * block
	if off < 0 || n < 0 || off%block != 0 || off > full || !(n%block == 0 && off+n <= full || off+n == len(b.bits)) {
		panic(fmt.Sprintf("cpu: values [%d, %d) of a %d × %d matrix in the tile layout: only whole blocks of 32 rows, or the rest", off, off+n, b.n, b.k))
	}
	return bf16TileBuf{b.bits[off : off+n : off+n], n / b.k, b.k}
}

// TileLayoutOff keeps every matrix of a rollout copy in rows even where
// the products could run on AMX tiles: the same model both ways on the
// same path, for tests and benchmarks.
var TileLayoutOff bool

// tileLayout says whether a rollout copy's matrices go into the tile
// layout: where the products run on AMX tiles, in float32.
func (d *Device[F]) tileLayout() bool {
	_, f32 := any(F(0)).(float32)
	return f32 && !TileLayoutOff && gemm.TileLayout()
}

// ProductMatrix returns b, an n × k matrix of a BF16Products arena, as a
// view in the tile layout when products from that layout run here and
// its depth suits the tile unit (a multiple of 32); false keeps it in
// rows.
func (d *Device[F]) ProductMatrix(b model.Buffer, n, k int) (model.Buffer, bool) {
	h, ok := b.(bf16DotBuf)
	if !ok || !d.tileLayout() || k%gemm.DotBF16Step != 0 {
		return b, false
	}
	return bf16TileBuf{[]uint16(h), n, k}, true
}

// packMatrix is Copy into t, a matrix in the tile layout, from its values
// in rows (a bf16 buffer, or t's own memory read in rows): the values,
// copied unless they are there already, are rearranged in place.
func (d *Device[F]) packMatrix(t bf16TileBuf, src model.Buffer) {
	rows, ok := asBF16(src)
	if !ok || len(rows) != len(t.bits) {
		panic(fmt.Sprintf("cpu: Copy of a %T of %d values into a %d × %d matrix in the tile layout: only bf16 values in rows pack", src, src.Len(), t.n, t.k))
	}
	if len(rows) > 0 && &rows[0] != &t.bits[0] {
		copy(t.bits, rows)
	}
	gemm.PackTileBF16(t.bits, t.n, t.k, d.threads)
}

// gemmTiles is Gemm with B in the tile layout: only float32 A·Bᵀ over the
// whole matrix, which is all a rollout copy computes.
func (d *Device[F]) gemmTiles(transA, transB bool, m, n, k int, alpha float32, a model.Buffer, lda int, b bf16TileBuf, ldb int, beta float32, c model.Buffer, ldc int) {
	a32, ok := any(buf[F](a)).([]float32)
	if !ok || transA || !transB || n != b.n || k != b.k || ldb != k ||
		!gemm.SgemmTileBF16TransB(m, n, k, alpha, a32, lda, b.bits, beta, any(buf[F](c)).([]float32), ldc, d.threads) {
		panic(fmt.Sprintf("cpu: a product with a %d × %d matrix in the tile layout as transB=%v B of [%d, %d] (transA=%v, ldb %d, float32 A: %v, AMX path on: %v): only A·Bᵀ over the whole matrix in float32 runs there",
			b.n, b.k, transB, n, k, transA, ldb, ok, gemm.TileLayout()))
	}
}

// embeddingTiles copies widened rows of a tied embedding kept in the tile
// layout.
func (d *Device[F]) embeddingTiles(o []F, ids []int32, w bf16TileBuf) {
	C := w.k
	d.parallel(len(ids), 64, func(lo, hi int) {
		row := make([]uint16, C)
		for t := lo; t < hi; t++ {
			id := int(ids[t])
			if id < 0 || id >= w.n {
				panic(fmt.Sprintf("cpu: token id %d at position %d outside the vocabulary [0, %d)", id, t, w.n))
			}
			gemm.TileRowBF16(row, w.bits, w.n, C, id)
			dst := o[t*C : (t+1)*C]
			for c, h := range row {
				dst[c] = F(bf16.ToFloat32(h))
			}
		}
	})
}
