package cpu

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Embedding copies row ids[t] of table[V, C] into out[t, :].
func (d *Device[F]) Embedding(out model.Buffer, ids []int32, table model.Buffer, C int) {
	defer d.timed(opEmbedding)()
	if t, ok := table.(bf16TileBuf); ok {
		d.embeddingTiles(buf[F](out), ids, t)
		return
	}
	if h, ok := asBF16(table); ok {
		d.embeddingBF16(buf[F](out), ids, h, C)
		return
	}
	o, w := buf[F](out), buf[F](table)
	V := len(w) / C
	d.parallel(len(ids), 64, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			id := int(ids[t])
			if id < 0 || id >= V {
				panic(fmt.Sprintf("cpu: token id %d at position %d outside the vocabulary [0, %d)", id, t, V))
			}
			copy(o[t*C:(t+1)*C], w[id*C:(id+1)*C])
		}
	})
}

// EmbeddingBackward accumulates dtable[ids[t]] += dout[t]. Rows are split by
// vocabulary id among the workers, so no two workers write the same row.
func (d *Device[F]) EmbeddingBackward(dtable model.Buffer, dout model.Buffer, ids []int32, C int) {
	dw, g := buf[F](dtable), buf[F](dout)
	V := len(dw) / C
	d.parallel(V, V/max(d.threads, 1)+1, func(lo, hi int) {
		for t, id := range ids {
			if int(id) < lo || int(id) >= hi {
				continue
			}
			row, src := dw[int(id)*C:(int(id)+1)*C], g[t*C:(t+1)*C]
			for c := range row {
				row[c] += src[c]
			}
		}
	})
}
