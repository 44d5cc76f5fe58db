package cuda

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/r1go/r1go/model"
)

var (
	kEmbeddingForward  = kernel("embedding.cu", "embedding_forward", 256)
	kEmbeddingBackward = kernel("embedding.cu", "embedding_backward", 256)
)

// Embedding copies row ids[t] of table[V, C] into out[t, :].
func (d *Device) Embedding(out model.Buffer, ids []int32, table model.Buffer, C int) {
	checkIDs(ids, table.Len()/C, "token id")
	po, obf, _ := weightArg(out, len(ids)*C, "Embedding out")
	pt, bf, _ := weightArg(table, -1, "Embedding table")
	defer d.enter()()
	if q, ok := d.copyOf(pt, table.Len()); ok && !bf {
		// Registered weights: their bf16 copy's rows are the float32 rows
		// rounded, which is what is read (ZeRO's sharded masters may have
		// given the float32 table back: rl/dp/masters.go).
		pt, bf = q, true
	}
	if bf || obf {
		// A frozen bf16 model's table (frozen.go): its rows widen exactly;
		// or an output on the bf16 residual stream: the rows are rounded,
		// which for registered weights gives their bf16 copy's rows.
		k := kEmbeddingForwardBF16
		switch {
		case bf && obf:
			k = kEmbeddingForwardBF16OBF16
		case obf:
			k = kEmbeddingForwardOBF16
		}
		d.launch(k, grid1(len(ids)), grid1(min(256, roundUp(C, 32))), 0, argPtr(po), argPtr(d.ints("ids", ids)), argPtr(pt), argInt(C))
		return
	}
	d.launch(kEmbeddingForward, grid1(len(ids)), grid1(min(256, roundUp(C, 32))), 0, argPtr(po), argPtr(d.ints("ids", ids)), argPtr(pt), argInt(C))
}

// EmbeddingBackward accumulates dtable[ids[t]] += dout[t], the positions
// of a row added in order (the CPU device's sums, bit for bit): one block
// a distinct id, so no two blocks write one row and no atomic add makes
// the sum depend on the order blocks run in.
func (d *Device) EmbeddingBackward(dtable model.Buffer, dout model.Buffer, ids []int32, C int) {
	checkIDs(ids, dtable.Len()/C, "token id")
	pt, pg := f32(dtable, -1, "EmbeddingBackward dtable"), f32(dout, len(ids)*C, "EmbeddingBackward dout")
	groups, rows := idGroups(ids)
	if rows == 0 {
		return
	}
	defer d.enter()()
	d.launch(kEmbeddingBackward, grid1(rows), grid1(min(256, roundUp(C, 32))), 0, argPtr(pt), argPtr(pg), argPtr(d.ints("id-groups", groups)),
		argInt(rows), argInt(C))
}

// idGroups lays out embedding_backward's groups: the U distinct ids in
// ascending order, U+1 offsets, then the positions of each id ascending.
func idGroups(ids []int32) (groups []int32, distinct int) {
	pos := make([]int32, len(ids))
	for t := range pos {
		pos[t] = int32(t)
	}
	slices.SortStableFunc(pos, func(a, b int32) int { return cmp.Compare(ids[a], ids[b]) })
	var uniq, start []int32
	for j, p := range pos {
		if j == 0 || ids[p] != ids[pos[j-1]] {
			uniq = append(uniq, ids[p])
			start = append(start, int32(j))
		}
	}
	start = append(start, int32(len(pos)))
	return slices.Concat(uniq, start, pos), len(uniq)
}

// checkIDs panics on an index outside [0, n): on the GPU it would read or
// write another tensor's memory.
func checkIDs(ids []int32, n int, what string) {
	for t, id := range ids {
		if id < 0 || int(id) >= n {
			panic(fmt.Sprintf("cuda: %s %d at position %d outside [0, %d)", what, id, t, n))
		}
	}
}

func roundUp(a, b int) int { return ceilDiv(a, b) * b }
