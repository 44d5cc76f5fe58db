package model

import "errors"

// A rollout copy's weight matrices in the device's product layout
// (BF16Products.ProductMatrix). On a CPU whose bf16
// products run on AMX tiles, a model with BF16Products keeps each matrix
// that is the B of a product (q|k|v, o, gate|up, down, the LM head) in
// model/cpu/gemm's tile layout (gemm.SgemmTileBF16TransB): the tile unit reads it as
// one stream and writes rows of C with no transpose, for the same bits as
// the same matrix in rows. The arena keeps its size and every other tensor
// (norms, biases) its place; the matrices' views are bf16TileBufs, which
// only a float32 A·Bᵀ product (Gemm) and a row lookup (Embedding, for a
// tied LM head) read. Whatever writes the arena in rows (CloneWith,
// CopyWeightsFrom, LoadWith, InitRandom) packs it afterwards (packTiles:
// Copy into each matrix's view from the same values read in rows), and
// such a model is never the source of a copy: its arena is not in the
// Hugging Face layout.

// errTileSource refuses to copy from a model in the tile layout.
var errTileSource = errors.New("model: a model whose matrices are in the tile layout (a rollout copy with bf16 products on AMX) is not a source to copy weights from")

// matrixView is a view of p that is the B of a product, n × k.
type matrixView struct {
	b    *Buffer
	n, k int
}

// tileMatrix is a product matrix in the device's product layout (tile)
// and the same memory read in rows (rows), where it is written.
type tileMatrix struct{ tile, rows Buffer }

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
	bp, ok := m.Dev.(BF16Products)
	decided := m.tiles != nil || m.viewsCut // the layout is chosen once, when the arena is made
	m.tiles, m.viewsCut = nil, true
	if !ok || !m.products || decided && !m.tiled {
		return
	}
	for _, v := range productMatrices(m.d, &m.p) {
		if t, ok := bp.ProductMatrix(*v.b, v.n, v.k); ok {
			m.tiles = append(m.tiles, tileMatrix{tile: t, rows: *v.b})
			*v.b = t
		}
	}
	m.tiled = len(m.tiles) > 0
	if m.tiled && m.d.tied {
		m.p.wte = m.p.lmHead // one matrix: the embedding reads its rows back
	}
}

// packTiles rearranges the matrices in the product layout after the arena
// was written in rows.
func (m *Model) packTiles() {
	for _, t := range m.tiles {
		m.Dev.Copy(t.tile, t.rows)
	}
}
