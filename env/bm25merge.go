package env

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// postingTable accumulates the postings of one run in memory. Each run
// starts from empty, so the first posting of a term in a run holds an
// absolute passage number; the merge turns it back into a delta.
type postingTable struct {
	ids   map[string]uint32
	terms []string
	post  [][]byte // per term: (passage delta, tf) uvarint pairs
	last  []uint32 // per term: last passage added
	df    []uint32
	bytes int64 // encoded postings held
}

func newPostingTable() *postingTable {
	return &postingTable{ids: make(map[string]uint32, 1<<16)}
}

func (t *postingTable) add(doc uint32, term string, tf uint32) {
	id, ok := t.ids[term]
	if !ok {
		id = uint32(len(t.terms))
		t.ids[term] = id
		t.terms = append(t.terms, term)
		t.post = append(t.post, nil)
		t.last = append(t.last, 0)
		t.df = append(t.df, 0)
	}
	n := len(t.post[id])
	t.post[id] = binary.AppendUvarint(t.post[id], uint64(doc-t.last[id]))
	t.post[id] = binary.AppendUvarint(t.post[id], uint64(tf))
	t.bytes += int64(len(t.post[id]) - n)
	t.last[id] = doc
	t.df[id]++
}

func (t *postingTable) sorted() []uint32 {
	order := make([]uint32, len(t.terms))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(t.terms[a], t.terms[b]) })
	return order
}

// runEntry is one term of a run.
type runEntry struct {
	term string
	df   uint32
	last uint32
	post []byte
}

// runIter yields a run's terms in sorted order; ok is false at the end.
type runIter interface {
	next() (e runEntry, ok bool, err error)
}

type memRun struct {
	t     *postingTable
	order []uint32
	i     int
}

func (t *postingTable) iter() *memRun { return &memRun{t: t, order: t.sorted()} }

func (m *memRun) next() (runEntry, bool, error) {
	if m.i == len(m.order) {
		return runEntry{}, false, nil
	}
	id := m.order[m.i]
	m.i++
	return runEntry{m.t.terms[id], m.t.df[id], m.t.last[id], m.t.post[id]}, true, nil
}

// spill writes the table as a sorted run file: per term, uvarint lengths
// and values of term, df, last passage and postings.
func (t *postingTable) spill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr []byte
	for _, id := range t.sorted() {
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(t.terms[id])))
		hdr = append(hdr, t.terms[id]...)
		hdr = binary.AppendUvarint(hdr, uint64(t.df[id]))
		hdr = binary.AppendUvarint(hdr, uint64(t.last[id]))
		hdr = binary.AppendUvarint(hdr, uint64(len(t.post[id])))
		w.Write(hdr)
		w.Write(t.post[id])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("spill run %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spill run %s: %w", path, err)
	}
	return nil
}

type fileRun struct {
	name string
	f    *os.File
	r    *bufio.Reader
}

func openRun(path string) (*fileRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &fileRun{name: path, f: f, r: bufio.NewReaderSize(f, 1<<20)}, nil
}

func (fr *fileRun) close() { fr.f.Close() }

func (fr *fileRun) next() (runEntry, bool, error) {
	n, err := binary.ReadUvarint(fr.r)
	if err == io.EOF {
		return runEntry{}, false, nil
	}
	bad := func(err error) (runEntry, bool, error) {
		return runEntry{}, false, fmt.Errorf("run %s: %w", fr.name, err)
	}
	if err != nil {
		return bad(err)
	}
	term := make([]byte, n)
	if _, err := io.ReadFull(fr.r, term); err != nil {
		return bad(err)
	}
	var v [3]uint64
	for i := range v {
		if v[i], err = binary.ReadUvarint(fr.r); err != nil {
			return bad(err)
		}
	}
	post := make([]byte, v[2])
	if _, err := io.ReadFull(fr.r, post); err != nil {
		return bad(err)
	}
	return runEntry{string(term), uint32(v[0]), uint32(v[1]), post}, true, nil
}

// runHead is the current entry of run idx in the merge heap.
type runHead struct {
	e   runEntry
	idx int
}

type runHeap []runHead

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := strings.Compare(h[i].e.term, h[j].e.term); c != 0 {
		return c < 0
	}
	return h[i].idx < h[j].idx // earlier runs hold earlier passages
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(runHead)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeRuns writes every section after the passages: passage lengths and
// offsets, then the postings of all runs merged term by term, then the
// sorted dictionary.
func mergeRuns(sw *sectionWriter, meta *indexMeta, runs []runIter, docLens []uint32, docOffs []uint64) error {
	sw.begin()
	if err := sw.uint32s(docLens); err != nil {
		return err
	}
	meta.DocLens = sw.end()
	sw.begin()
	if err := sw.uint64s(docOffs); err != nil {
		return err
	}
	meta.DocOffs = sw.end()

	h := make(runHeap, 0, len(runs))
	advance := func(idx int) error {
		e, ok, err := runs[idx].next()
		if err != nil {
			return err
		}
		if ok {
			heap.Push(&h, runHead{e, idx})
		}
		return nil
	}
	for i := range runs {
		if err := advance(i); err != nil {
			return err
		}
	}
	var (
		blob     []byte
		termOffs = []uint32{0}
		df       []uint32
		postOffs = []uint64{0}
		pos      uint64
		delta    []byte
	)
	sw.begin()
	for len(h) > 0 {
		term := h[0].e.term
		var termDF uint32
		var prevLast uint32
		first := true
		for len(h) > 0 && h[0].e.term == term {
			top := heap.Pop(&h).(runHead)
			e := top.e
			post := e.post
			if !first {
				abs, n := binary.Uvarint(post)
				if n <= 0 || uint32(abs) < prevLast {
					return fmt.Errorf("run %d: postings of %q out of order", top.idx, term)
				}
				delta = binary.AppendUvarint(delta[:0], abs-uint64(prevLast))
				if _, err := sw.Write(delta); err != nil {
					return err
				}
				pos += uint64(len(delta))
				post = post[n:]
			}
			if _, err := sw.Write(post); err != nil {
				return err
			}
			pos += uint64(len(post))
			termDF += e.df
			prevLast, first = e.last, false
			if err := advance(top.idx); err != nil {
				return err
			}
		}
		blob = append(blob, term...)
		if int64(len(blob)) > 1<<32-1 {
			return errors.New("term dictionary over 4 GiB")
		}
		termOffs = append(termOffs, uint32(len(blob)))
		df = append(df, termDF)
		postOffs = append(postOffs, pos)
	}
	meta.Postings = sw.end()
	meta.Terms = len(df)
	sw.begin()
	if _, err := sw.Write(blob); err != nil {
		return err
	}
	meta.TermBlob = sw.end()
	sw.begin()
	if err := sw.uint32s(termOffs); err != nil {
		return err
	}
	meta.TermOffs = sw.end()
	sw.begin()
	if err := sw.uint32s(df); err != nil {
		return err
	}
	meta.DF = sw.end()
	sw.begin()
	if err := sw.uint64s(postOffs); err != nil {
		return err
	}
	meta.PostOffs = sw.end()
	return nil
}
