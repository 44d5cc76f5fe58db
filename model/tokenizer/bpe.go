package tokenizer

import (
	"container/heap"
	"strings"
)

// bpe is the model part of a tokenizer.json: the vocabulary and the ranked
// merges. Symbols are token ids from the start; a merge joins two adjacent
// ids into the id of their concatenation.
type bpe struct {
	vocab        map[string]int    // token string -> id, the model's own tokens
	merges       map[uint64]uint64 // pairKey(left, right) -> rank<<32 | merged id
	byteIDs      [256]int32        // byte -> id of its byte-level rune; -1 if absent
	byteLevel    bool              // symbols start as bytes (else as runes)
	ignoreMerges bool              // a piece that is itself in the vocabulary is taken whole
	unkID        int               // -1: runes missing from the vocabulary are dropped
	fuseUnk      bool
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// longWord is the symbol count above which merging switches from the
// quadratic scan (fastest for the short pieces that make up text) to the
// heap, which keeps a megabyte-long run of letters near-linear.
const longWord = 96

// appendPiece encodes one pre-tokenized piece (raw bytes, not yet mapped to
// the byte-level alphabet) and appends its ids.
func (m *bpe) appendPiece(dst []int, piece string, st *encodeState) []int {
	if m.ignoreMerges {
		key := piece
		if m.byteLevel {
			key = byteLevelString(piece)
		}
		if id, ok := m.vocab[key]; ok {
			return append(dst, id)
		}
	}
	sym := st.sym[:0]
	if m.byteLevel {
		for i := 0; i < len(piece); i++ {
			if id := m.byteIDs[piece[i]]; id >= 0 {
				sym = append(sym, id)
			} else if m.unkID >= 0 && !(m.fuseUnk && len(sym) > 0 && sym[len(sym)-1] == int32(m.unkID)) {
				sym = append(sym, int32(m.unkID))
			}
		}
	} else {
		for _, r := range piece {
			if id, ok := m.vocab[string(r)]; ok {
				sym = append(sym, int32(id))
			} else if m.unkID >= 0 && !(m.fuseUnk && len(sym) > 0 && sym[len(sym)-1] == int32(m.unkID)) {
				sym = append(sym, int32(m.unkID))
			}
		}
	}
	if len(sym) > longWord {
		sym = m.mergeLong(sym)
	} else {
		sym = m.mergeShort(sym, st)
	}
	for _, id := range sym {
		dst = append(dst, int(id))
	}
	st.sym = sym
	return dst
}

const noMerge = ^uint64(0)

// mergeShort applies merges lowest rank first, leftmost among equal ranks,
// which is the order of the Hugging Face priority queue. ranks[i] holds the
// merge of sym[i] and sym[i+1].
func (m *bpe) mergeShort(sym []int32, st *encodeState) []int32 {
	if len(sym) < 2 {
		return sym
	}
	ranks := st.ranks[:0]
	for i := 0; i+1 < len(sym); i++ {
		ranks = append(ranks, m.lookup(sym[i], sym[i+1]))
	}
	for {
		best := 0
		for i := 1; i < len(ranks); i++ {
			if ranks[i]>>32 < ranks[best]>>32 {
				best = i
			}
		}
		if ranks[best] == noMerge {
			break
		}
		sym[best] = int32(uint32(ranks[best]))
		sym = append(sym[:best+1], sym[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best < len(ranks) {
			ranks[best] = m.lookup(sym[best], sym[best+1])
		}
		if best > 0 {
			ranks[best-1] = m.lookup(sym[best-1], sym[best])
		}
		if len(ranks) == 0 {
			break
		}
	}
	st.ranks = ranks
	return sym
}

func (m *bpe) lookup(left, right int32) uint64 {
	if v, ok := m.merges[pairKey(left, right)]; ok {
		return v
	}
	return noMerge
}

// mergeLong is the same merge order driven by a heap over a linked list of
// symbols; a stale heap entry (its pair changed since it was pushed) is
// skipped when popped.
func (m *bpe) mergeLong(sym []int32) []int32 {
	n := len(sym)
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range sym {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	h := &mergeHeap{}
	push := func(pos int32) {
		if pos < 0 || next[pos] < 0 {
			return
		}
		if v := m.lookup(sym[pos], sym[next[pos]]); v != noMerge {
			heap.Push(h, pendingMerge{rank: uint32(v >> 32), pos: pos, id: int32(uint32(v))})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	for h.Len() > 0 {
		top := heap.Pop(h).(pendingMerge)
		right := next[top.pos]
		if !alive[top.pos] || right < 0 {
			continue
		}
		if v := m.lookup(sym[top.pos], sym[right]); v == noMerge || int32(uint32(v)) != top.id || uint32(v>>32) != top.rank {
			continue
		}
		sym[top.pos] = top.id
		alive[right] = false
		next[top.pos] = next[right]
		if next[right] >= 0 {
			prev[next[right]] = top.pos
		}
		push(prev[top.pos])
		push(top.pos)
	}
	out := sym[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, sym[i])
	}
	return out
}

type pendingMerge struct {
	rank uint32
	pos  int32
	id   int32
}

type mergeHeap []pendingMerge

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].pos < h[j].pos
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(pendingMerge)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// splitMerge reads one merge in the legacy string form "a b". A token that
// itself holds a space cannot be written unambiguously; the split chosen is
// the first space at which both halves are in the vocabulary.
func splitMerge(s string, vocab map[string]int) (string, string, bool) {
	for i := 0; i < len(s); {
		k := strings.IndexByte(s[i:], ' ')
		if k < 0 {
			break
		}
		a, b := s[:i+k], s[i+k+1:]
		if _, ok := vocab[a]; ok {
			if _, ok := vocab[b]; ok {
				return a, b, true
			}
		}
		i += k + 1
	}
	if a, b, ok := strings.Cut(s, " "); ok {
		return a, b, true // both halves checked by the caller, which names the missing one
	}
	return "", "", false
}
