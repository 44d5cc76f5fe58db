package env

import (
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/r1go/r1go/data"
)

// BM25Params are the BM25 constants, chosen when the index is opened.
// Pyserini's defaults (k1 0.9, b 0.4) are DefaultBM25.
type BM25Params struct {
	K1 float64
	B  float64
}

// DefaultBM25 is Pyserini's BM25 setting.
var DefaultBM25 = BM25Params{K1: 0.9, B: 0.4}

// Hit is one retrieved passage.
type Hit struct {
	Doc     uint32 // row in the corpus, 0-based
	Score   float64
	Passage data.Passage
}

// Retriever answers a batch of queries with the top k passages of each.
// The local BM25 index and the HTTP clients are Retrievers.
type Retriever interface {
	Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error)
}

// Index is an opened BM25 index file. The term dictionary and postings are
// in memory; passages stay in the file and are read per hit. Search is
// safe for concurrent use.
//
// A passage d scores, for the distinct query terms t with query count q_t,
//
//	sum_t q_t * idf(t) * tf(t,d)*(k1+1) / (tf(t,d) + k1*(1-b+b*len(d)/avglen))
//	idf(t) = ln(1 + (N - df(t) + 0.5)/(df(t) + 0.5))
//
// (Robertson's BM25 with Lucene's non-negative idf; Lucene drops the
// constant k1+1, which changes no ranking.)
type Index struct {
	path     string
	f        *os.File
	meta     indexMeta
	params   BM25Params
	docLens  []uint32
	docOffs  []uint64
	termBlob string
	termOffs []uint32
	df       []uint32
	postOffs []uint64
	postings []byte
	norm     []float64 // k1*(1-b+b*len/avglen) per passage
	avgLen   float64
	scratch  sync.Pool
}

// IndexError reports a damaged or foreign index file.
type IndexError struct {
	Path string
	What string
}

func (e *IndexError) Error() string { return "env: index " + e.Path + ": " + e.What }

// OpenIndex opens an index file written by BuildIndex and checks every
// in-memory section against its checksum.
func OpenIndex(path string, p BM25Params) (*Index, error) {
	if p.K1 < 0 || p.B < 0 || p.B > 1 || math.IsNaN(p.K1) || math.IsNaN(p.B) {
		return nil, fmt.Errorf("env: BM25 k1=%v b=%v: want k1 >= 0 and 0 <= b <= 1", p.K1, p.B)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("env: open index: %w", err)
	}
	ix := &Index{path: path, f: f, params: p}
	if err := ix.load(); err != nil {
		f.Close()
		return nil, err
	}
	return ix, nil
}

func (ix *Index) bad(format string, args ...any) error {
	return &IndexError{Path: ix.path, What: fmt.Sprintf(format, args...)}
}

func (ix *Index) load() error {
	st, err := ix.f.Stat()
	if err != nil {
		return fmt.Errorf("env: index %s: %w", ix.path, err)
	}
	hdr := make([]byte, indexHeaderSize)
	if n, _ := ix.f.ReadAt(hdr, 0); n < 20 || string(hdr[:8]) != indexMagic {
		return ix.bad("not an r1go BM25 index (bad magic)")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != indexVersion {
		return ix.bad("format version %d, this build reads %d", v, indexVersion)
	}
	n := int(binary.LittleEndian.Uint32(hdr[12:]))
	if n > indexHeaderSize-20 {
		return ix.bad("header length %d out of range", n)
	}
	js := hdr[20 : 20+n]
	if crc32.Checksum(js, crcTable) != binary.LittleEndian.Uint32(hdr[16:]) {
		return ix.bad("header checksum mismatch (corrupt file)")
	}
	if err := json.Unmarshal(js, &ix.meta); err != nil {
		return ix.bad("header: %v", err)
	}
	m := &ix.meta
	secs := map[string]section{"docs": m.Docs, "doc_lens": m.DocLens, "doc_offs": m.DocOffs, "term_blob": m.TermBlob,
		"term_offs": m.TermOffs, "df": m.DF, "post_offs": m.PostOffs, "postings": m.Postings}
	for name, s := range secs {
		if s.Off < indexHeaderSize || s.Len < 0 || s.Off+s.Len > st.Size() {
			return ix.bad("section %s [%d, +%d) outside the %d-byte file (truncated?)", name, s.Off, s.Len, st.Size())
		}
	}
	read := func(name string, s section) ([]byte, error) {
		b := make([]byte, s.Len)
		if _, err := ix.f.ReadAt(b, s.Off); err != nil {
			return nil, fmt.Errorf("env: index %s: section %s: %w", ix.path, name, err)
		}
		if crc32.Checksum(b, crcTable) != s.CRC {
			return nil, ix.bad("section %s: checksum mismatch (corrupt file)", name)
		}
		return b, nil
	}
	N, T := m.Passages, m.Terms
	want := map[string]int64{"doc_lens": 4 * int64(N), "doc_offs": 8 * int64(N+1), "term_offs": 4 * int64(T+1), "df": 4 * int64(T), "post_offs": 8 * int64(T+1)}
	for name, w := range want {
		if secs[name].Len != w {
			return ix.bad("section %s has %d bytes, want %d for %d passages and %d terms", name, secs[name].Len, w, N, T)
		}
	}
	b, err := read("doc_lens", m.DocLens)
	if err != nil {
		return err
	}
	ix.docLens = leUint32s(b)
	if b, err = read("doc_offs", m.DocOffs); err != nil {
		return err
	}
	ix.docOffs = leUint64s(b)
	if b, err = read("term_blob", m.TermBlob); err != nil {
		return err
	}
	ix.termBlob = string(b)
	if b, err = read("term_offs", m.TermOffs); err != nil {
		return err
	}
	ix.termOffs = leUint32s(b)
	if b, err = read("df", m.DF); err != nil {
		return err
	}
	ix.df = leUint32s(b)
	if b, err = read("post_offs", m.PostOffs); err != nil {
		return err
	}
	ix.postOffs = leUint64s(b)
	if ix.postings, err = read("postings", m.Postings); err != nil {
		return err
	}
	if !monotone64(ix.docOffs) || ix.docOffs[N] != uint64(m.Docs.Len) || !monotone64(ix.postOffs) ||
		ix.postOffs[T] != uint64(len(ix.postings)) || !monotone32(ix.termOffs) || int(ix.termOffs[T]) != len(ix.termBlob) {
		return ix.bad("offset tables inconsistent")
	}
	var total int64
	for _, l := range ix.docLens {
		total += int64(l)
	}
	if total != m.TotalLen {
		return ix.bad("passage lengths sum to %d, header says %d", total, m.TotalLen)
	}
	ix.SetParams(ix.params)
	return nil
}

// SetParams changes k1 and b; not safe while searches run.
func (ix *Index) SetParams(p BM25Params) {
	ix.params = p
	N := len(ix.docLens)
	ix.avgLen = 0
	if N > 0 {
		ix.avgLen = float64(ix.meta.TotalLen) / float64(N)
	}
	if ix.norm == nil {
		ix.norm = make([]float64, N)
	}
	for d, l := range ix.docLens {
		rel := 0.0
		if ix.avgLen > 0 {
			rel = float64(l) / ix.avgLen
		}
		ix.norm[d] = p.K1 * (1 - p.B + p.B*rel)
	}
}

func leUint32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func leUint64s(b []byte) []uint64 {
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

func monotone64(v []uint64) bool {
	for i := 1; i < len(v); i++ {
		if v[i] < v[i-1] {
			return false
		}
	}
	return len(v) > 0 && v[0] == 0
}

func monotone32(v []uint32) bool {
	for i := 1; i < len(v); i++ {
		if v[i] < v[i-1] {
			return false
		}
	}
	return len(v) > 0 && v[0] == 0
}

// Close releases the file.
func (ix *Index) Close() error { return ix.f.Close() }

// Len is the number of passages.
func (ix *Index) Len() int { return len(ix.docLens) }

// Terms is the number of distinct terms.
func (ix *Index) Terms() int { return len(ix.df) }

// Analyzer is the analyzer the index was built with; queries use it too.
func (ix *Index) Analyzer() AnalyzerConfig { return ix.meta.Analyzer }

// MemoryBytes is the size of the in-memory tables (postings, dictionary,
// per-passage arrays); passages themselves stay on disk.
func (ix *Index) MemoryBytes() int64 {
	return int64(len(ix.postings)) + int64(len(ix.termBlob)) + 4*int64(len(ix.termOffs)+len(ix.df)+len(ix.docLens)) +
		8*int64(len(ix.postOffs)+len(ix.docOffs)+len(ix.norm))
}

// lookup finds a term's position in the sorted dictionary.
func (ix *Index) lookup(term string) (int, bool) {
	T := len(ix.df)
	i := sort.Search(T, func(i int) bool { return ix.termBlob[ix.termOffs[i]:ix.termOffs[i+1]] >= term })
	return i, i < T && ix.termBlob[ix.termOffs[i]:ix.termOffs[i+1]] == term
}

// IDF is ln(1 + (N - df + 0.5)/(df + 0.5)).
func (ix *Index) IDF(df int) float64 {
	N := float64(len(ix.docLens))
	return math.Log(1 + (N-float64(df)+0.5)/(float64(df)+0.5))
}

type searchScratch struct {
	acc     []float64
	touched []uint32
	an      *analyzer
}

// Search returns the k best passages for a free-text query, best first;
// ties go to the earlier passage.
func (ix *Index) Search(query string, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	sc, _ := ix.scratch.Get().(*searchScratch)
	if sc == nil {
		sc = &searchScratch{acc: make([]float64, len(ix.docLens)), an: newAnalyzer(ix.meta.Analyzer)}
	}
	defer ix.scratch.Put(sc)
	qtf := map[string]int{}
	sc.an.terms(query, func(t string) { qtf[t]++ })
	sc.touched = sc.touched[:0]
	defer func() {
		for _, d := range sc.touched {
			sc.acc[d] = 0
		}
	}()
	// a fixed term order makes the float sums, and so ties, reproducible
	qterms := make([]string, 0, len(qtf))
	for t := range qtf {
		qterms = append(qterms, t)
	}
	sort.Strings(qterms)
	k1p1 := ix.params.K1 + 1
	N := uint64(len(ix.docLens))
	for _, term := range qterms {
		q := qtf[term]
		ti, ok := ix.lookup(term)
		if !ok {
			continue
		}
		w := float64(q) * ix.IDF(int(ix.df[ti]))
		p := ix.postings[ix.postOffs[ti]:ix.postOffs[ti+1]]
		doc := uint64(0)
		for len(p) > 0 {
			// most deltas and nearly all term frequencies fit one byte
			var delta, tf uint64
			if p[0] < 0x80 {
				delta, p = uint64(p[0]), p[1:]
			} else {
				v, n := binary.Uvarint(p)
				if n <= 0 {
					return nil, ix.bad("postings of %q corrupt", term)
				}
				delta, p = v, p[n:]
			}
			if len(p) > 0 && p[0] < 0x80 {
				tf, p = uint64(p[0]), p[1:]
			} else {
				v, n := binary.Uvarint(p)
				if n <= 0 {
					return nil, ix.bad("postings of %q corrupt", term)
				}
				tf, p = v, p[n:]
			}
			doc += delta
			if doc >= N {
				return nil, ix.bad("postings of %q name passage %d of %d", term, doc, N)
			}
			if sc.acc[doc] == 0 {
				sc.touched = append(sc.touched, uint32(doc))
			}
			ftf := float64(tf)
			sc.acc[doc] += w * ftf * k1p1 / (ftf + ix.norm[doc])
		}
	}
	h := make(hitHeap, 0, k+1)
	for _, d := range sc.touched {
		s := sc.acc[d]
		if len(h) < k {
			heap.Push(&h, Hit{Doc: d, Score: s})
		} else if better(Hit{Doc: d, Score: s}, h[0]) {
			h[0] = Hit{Doc: d, Score: s}
			heap.Fix(&h, 0)
		}
	}
	hits := make([]Hit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		hits[i] = heap.Pop(&h).(Hit)
	}
	for i := range hits {
		p, err := ix.Passage(hits[i].Doc)
		if err != nil {
			return nil, err
		}
		hits[i].Passage = p
	}
	return hits, nil
}

func better(a, b Hit) bool { return a.Score > b.Score || (a.Score == b.Score && a.Doc < b.Doc) }

// hitHeap is a min-heap: the worst kept hit on top.
type hitHeap []Hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Passage reads passage d from the file.
func (ix *Index) Passage(d uint32) (data.Passage, error) {
	if int(d) >= len(ix.docLens) {
		return data.Passage{}, fmt.Errorf("env: index %s: passage %d of %d", ix.path, d, len(ix.docLens))
	}
	lo, hi := ix.docOffs[d], ix.docOffs[d+1]
	b := make([]byte, hi-lo)
	if _, err := ix.f.ReadAt(b, ix.meta.Docs.Off+int64(lo)); err != nil {
		return data.Passage{}, fmt.Errorf("env: index %s: passage %d: %w", ix.path, d, err)
	}
	var fields [4]string // the fourth, wikipedia_id, is optional
	for i := range fields {
		if i == 3 && len(b) == 0 {
			break
		}
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return data.Passage{}, ix.bad("passage %d record corrupt", d)
		}
		fields[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	if len(b) != 0 {
		return data.Passage{}, ix.bad("passage %d record corrupt", d)
	}
	return data.Passage{ID: fields[0], Title: fields[1], Contents: fields[2], WikipediaID: fields[3]}, nil
}

// Retrieve implements Retriever over the local index; the queries of a
// batch are searched in parallel, up to GOMAXPROCS at a time.
func (ix *Index) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	out := make([][]Hit, len(queries))
	errs := make([]error, len(queries))
	workers := min(len(queries), runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(queries) {
					return
				}
				if errs[i] = ctx.Err(); errs[i] != nil {
					return
				}
				out[i], errs[i] = ix.Search(queries[i], k)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errEmptyQuery is returned by tools for a blank query.
var errEmptyQuery = errors.New("empty query")

func blank(s string) bool { return strings.TrimSpace(s) == "" }
