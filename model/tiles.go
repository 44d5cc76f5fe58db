package model

import (
	"errors"
	"fmt"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model/gemm"
)

// A rollout copy's weight matrices in the tile layout. On a CPU whose bf16
// products run on AMX tiles, a model with BF16Products keeps each matrix
// that is the B of a product (q|k|v, o, gate|up, down, the LM head) in
// gemm's tile layout (gemm.SgemmTileBF16TransB): the tile unit reads it as
// one stream and writes rows of C with no transpose, for the same bits as
// the same matrix in rows. The arena keeps its size and every other tensor
// (norms, biases) its place; the matrices' views are bf16TileBufs, which
// only a float32 A·Bᵀ product (Gemm) and a row lookup (Embedding, for a
// tied LM head) read. Whatever writes the arena in rows (CloneWith,
// CopyWeightsFrom, LoadWith, InitRandom) packs it afterwards, and such a
// model is never the source of a copy: its arena is not in the Hugging
// Face layout.

// errTileSource refuses to copy from a model in the tile layout.
var errTileSource = errors.New("model: a model whose matrices are in the tile layout (a rollout copy with bf16 products on AMX) is not a source to copy weights from")

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
func (b bf16TileBuf) Slice(off, n int) Buffer {
	block := 32 * b.k
	full := b.n / 32 * block
	if off < 0 || n < 0 || off%block != 0 || off > full || !(n%block == 0 && off+n <= full || off+n == len(b.bits)) {
		panic(fmt.Sprintf("model: values [%d, %d) of a %d × %d matrix in the tile layout: only whole blocks of 32 rows, or the rest", off, off+n, b.n, b.k))
	}
	return bf16TileBuf{b.bits[off : off+n : off+n], n / b.k, b.k}
}

// tileLayoutOff keeps every matrix in rows (tests: the same model both
// ways on the same path).
var tileLayoutOff bool

// tileLayout says whether a rollout copy's matrices go into the tile
// layout: where the products run on AMX tiles, in float32.
func (d *CPU[F]) tileLayout() bool {
	_, f32 := any(F(0)).(float32)
	return f32 && !tileLayoutOff && gemm.TileLayout()
}

// ProductMatrix returns b, an n × k matrix of a BF16Products arena, as a
// view in the tile layout when products from that layout run here and
// its depth suits the tile unit (a multiple of 32); false keeps it in
// rows.
func (d *CPU[F]) ProductMatrix(b Buffer, n, k int) (Buffer, bool) {
	h, ok := b.(bf16DotBuf)
	if !ok || !d.tileLayout() || k%gemm.DotBF16Step != 0 {
		return b, false
	}
	return bf16TileBuf{[]uint16(h), n, k}, true
}

// PackMatrix rearranges b, a bf16TileBuf whose values were written in rows,
// into the tile layout.
func (d *CPU[F]) PackMatrix(b Buffer) {
	t := b.(bf16TileBuf)
	gemm.PackTileBF16(t.bits, t.n, t.k, d.threads)
}

// matrixView is a view of p that is the B of a product, n × k.
type matrixView struct {
	b    *Buffer
	n, k int
}

// productMatrices lists p's product matrices, each once: every layer's
// q|k|v, o, gate|up and down, and the LM head.
func productMatrices(d dims, p *params) []matrixView {
	var out []matrixView
	for l := range p.layers {
		lp := &p.layers[l]
		out = append(out, matrixView{&lp.wqkv, d.QKV, d.C}, matrixView{&lp.wo, d.C, d.Q},
			matrixView{&lp.wgu, 2 * d.I, d.C}, matrixView{&lp.wd, d.C, d.I})
	}
	if p.lmHead != nil {
		out = append(out, matrixView{&p.lmHead, d.V, d.C})
	}
	return out
}

// setViews makes the parameter views of the arena: for a rollout copy,
// each product matrix in the device's product layout where it has one
// (BF16Products.ProductMatrix), listed in m.tiles.
func (m *Model) setViews() {
	m.p = views(m.d, m.specs, m.Params)
	m.tiles = nil
	bp, ok := m.Dev.(BF16Products)
	if !ok || !m.products {
		return
	}
	for _, v := range productMatrices(m.d, &m.p) {
		if t, ok := bp.ProductMatrix(*v.b, v.n, v.k); ok {
			*v.b = t
			m.tiles = append(m.tiles, t)
		}
	}
	if len(m.tiles) > 0 && m.d.tied {
		m.p.wte = m.p.lmHead // one matrix: the embedding reads its rows back
	}
}

// packTiles rearranges the matrices in the product layout after the arena
// was written in rows.
func (m *Model) packTiles() {
	for _, b := range m.tiles {
		m.Dev.(BF16Products).PackMatrix(b)
	}
}

// gemmTiles is Gemm with B in the tile layout: only float32 A·Bᵀ over the
// whole matrix, which is all a rollout copy computes.
func (d *CPU[F]) gemmTiles(transA, transB bool, m, n, k int, alpha float32, a Buffer, lda int, b bf16TileBuf, ldb int, beta float32, c Buffer, ldc int) {
	a32, ok := any(buf[F](a)).([]float32)
	if !ok || transA || !transB || n != b.n || k != b.k || ldb != k ||
		!gemm.SgemmTileBF16TransB(m, n, k, alpha, a32, lda, b.bits, beta, any(buf[F](c)).([]float32), ldc, d.threads) {
		panic(fmt.Sprintf("model: a product with a %d × %d matrix in the tile layout as transB=%v B of [%d, %d] (transA=%v, ldb %d, float32 A: %v, AMX path on: %v): only A·Bᵀ over the whole matrix in float32 runs there",
			b.n, b.k, transB, n, k, transA, ldb, ok, gemm.TileLayout()))
	}
}

// embeddingTiles copies widened rows of a tied embedding kept in the tile
// layout.
func (d *CPU[F]) embeddingTiles(o []F, ids []int32, w bf16TileBuf) {
	C := w.k
	d.parallel(len(ids), 64, func(lo, hi int) {
		row := make([]uint16, C)
		for t := lo; t < hi; t++ {
			id := int(ids[t])
			if id < 0 || id >= w.n {
				panic(fmt.Sprintf("model: token id %d at position %d outside the vocabulary [0, %d)", id, t, w.n))
			}
			gemm.TileRowBF16(row, w.bits, w.n, C, id)
			dst := o[t*C : (t+1)*C]
			for c, h := range row {
				dst[c] = F(bf16.ToFloat32(h))
			}
		}
	})
}
