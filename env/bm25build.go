package env

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/r1go/r1go/data"
)

// BuildOptions controls BuildIndex.
type BuildOptions struct {
	Analyzer AnalyzerConfig
	// Workers analyse text in parallel; 0 means GOMAXPROCS.
	Workers int
	// Source describes the corpus file, stored in the index so a later run
	// can tell whether the index still matches (see OpenOrBuildIndex).
	Source CorpusFingerprint
	// MemoryBudget bounds the postings held in memory (bytes of encoded
	// postings); past it a sorted run is spilled next to the output and the
	// runs are merged at the end. 0 means 256 MiB.
	MemoryBudget int64
	// Progress, when set, is called every 100k passages and at least every
	// 10 seconds while passages arrive, so a long build is never silent.
	Progress func(passages int)
}

// CorpusFingerprint identifies a corpus file by name, size and time.
type CorpusFingerprint struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Layout  string    `json:"layout"`
}

// BuildStats reports what BuildIndex did.
type BuildStats struct {
	Passages int
	Terms    int
	Postings int64
	Skipped  int                 // malformed corpus lines skipped
	Reports  []*data.CorpusError // the first skipped lines, with file, line and field
	Bytes    int64
	Runs     int // sorted runs merged (1: everything fitted the memory budget)
	Elapsed  time.Duration
}

const (
	indexMagic      = "R1GOBM25"
	indexVersion    = 1
	indexHeaderSize = 4096
	batchPassages   = 512
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// section locates one part of the index file.
type section struct {
	Off int64  `json:"off"`
	Len int64  `json:"len"`
	CRC uint32 `json:"crc32c"`
}

// indexMeta is the JSON header of an index file.
type indexMeta struct {
	Version  int               `json:"version"`
	Passages int               `json:"passages"`
	Terms    int               `json:"terms"`
	TotalLen int64             `json:"total_len"` // sum of passage lengths in terms
	Analyzer AnalyzerConfig    `json:"analyzer"`
	Source   CorpusFingerprint `json:"source"`
	Built    time.Time         `json:"built"`
	Docs     section           `json:"docs"`
	DocLens  section           `json:"doc_lens"`
	DocOffs  section           `json:"doc_offs"`
	TermBlob section           `json:"term_blob"`
	TermOffs section           `json:"term_offs"`
	DF       section           `json:"df"`
	PostOffs section           `json:"post_offs"`
	Postings section           `json:"postings"`
}

type passageBatch struct {
	docs []data.Passage
	res  chan *analyzedBatch
}

// analyzedBatch holds the distinct terms of each passage of a batch with
// their frequencies, flattened.
type analyzedBatch struct {
	terms []string
	tfs   []uint32
	ends  []int    // ends[i] is the end of passage i in terms
	lens  []uint32 // passage length in terms
}

func analyzeBatch(a *analyzer, docs []data.Passage, counts map[string]uint32) *analyzedBatch {
	out := &analyzedBatch{ends: make([]int, len(docs)), lens: make([]uint32, len(docs))}
	for i, p := range docs {
		clear(counts)
		n := uint32(0)
		a.terms(p.Contents, func(t string) { counts[t]++; n++ })
		for t, c := range counts {
			out.terms = append(out.terms, t)
			out.tfs = append(out.tfs, c)
		}
		out.ends[i], out.lens[i] = len(out.terms), n
	}
	return out
}

// sectionWriter writes one section and tracks its length and checksum.
type sectionWriter struct {
	w   *bufio.Writer
	off int64
	sec section
	crc hash.Hash32
}

func (s *sectionWriter) begin() { s.sec = section{Off: s.off}; s.crc = crc32.New(crcTable) }

func (s *sectionWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.crc.Write(p[:n])
	s.off += int64(n)
	s.sec.Len += int64(n)
	return n, err
}

func (s *sectionWriter) end() section { s.sec.CRC = s.crc.Sum32(); return s.sec }

func (s *sectionWriter) uint32s(v []uint32) error {
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], x)
		if _, err := s.Write(b[:]); err != nil {
			return err
		}
	}
	return nil
}

func (s *sectionWriter) uint64s(v []uint64) error {
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], x)
		if _, err := s.Write(b[:]); err != nil {
			return err
		}
	}
	return nil
}

// BuildIndex reads a corpus and writes a BM25 index file at path. The
// passages are stored in the file too, so the index alone serves queries.
// The file appears atomically: it is written under a temporary name and
// renamed when complete.
func BuildIndex(cr *data.CorpusReader, path string, opts BuildOptions) (BuildStats, error) {
	start := time.Now()
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return BuildStats{}, fmt.Errorf("env: build index: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	sw := &sectionWriter{w: bw, off: indexHeaderSize}
	if _, err := f.Seek(indexHeaderSize, io.SeekStart); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}

	// reader -> workers -> merger in corpus order
	workCh := make(chan *passageBatch, workers*2)
	orderCh := make(chan *passageBatch, workers*4)
	var readErr error
	go func() {
		defer close(workCh)
		defer close(orderCh)
		for {
			b := &passageBatch{res: make(chan *analyzedBatch, 1)}
			for len(b.docs) < batchPassages {
				p, err := cr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					readErr = err
					break
				}
				b.docs = append(b.docs, p)
			}
			if len(b.docs) > 0 {
				orderCh <- b
				workCh <- b
			}
			if len(b.docs) < batchPassages {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := newAnalyzer(opts.Analyzer)
			counts := make(map[string]uint32, 256)
			for b := range workCh {
				b.res <- analyzeBatch(a, b.docs, counts)
			}
		}()
	}

	table := newPostingTable()
	var (
		runs     []string // spilled run files, in corpus order
		docLens  []uint32
		docOffs  = []uint64{0}
		nPost    int64
		totalLen int64
		writeErr error
		rec      []byte
	)
	defer func() {
		for _, r := range runs {
			os.Remove(r)
		}
	}()
	budget := opts.MemoryBudget
	if budget <= 0 {
		budget = 256 << 20
	}
	sw.begin()
	lastProgress := time.Now()
	for b := range orderCh {
		ab := <-b.res
		if writeErr != nil {
			continue // drain so the reader and workers finish
		}
		begin := 0
		for i, p := range b.docs {
			doc := uint32(len(docLens))
			rec = appendDocRecord(rec[:0], p)
			if _, err := sw.Write(rec); err != nil {
				writeErr = err
				break
			}
			docOffs = append(docOffs, uint64(sw.sec.Len))
			docLens = append(docLens, ab.lens[i])
			totalLen += int64(ab.lens[i])
			for j := begin; j < ab.ends[i]; j++ {
				table.add(doc, ab.terms[j], ab.tfs[j])
			}
			nPost += int64(ab.ends[i] - begin)
			begin = ab.ends[i]
			if opts.Progress != nil && (len(docLens)%100000 == 0 || time.Since(lastProgress) >= 10*time.Second) {
				lastProgress = time.Now()
				opts.Progress(len(docLens))
			}
		}
		if writeErr == nil && table.bytes >= budget {
			run := fmt.Sprintf("%s.run%d", tmp, len(runs))
			runs = append(runs, run)
			if err := table.spill(run); err != nil {
				writeErr = err
			}
			table = newPostingTable()
		}
	}
	wg.Wait()
	if readErr != nil {
		return BuildStats{}, fmt.Errorf("env: build index: %w", readErr)
	}
	if writeErr != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, writeErr)
	}
	if len(docLens) == 0 {
		return BuildStats{}, fmt.Errorf("env: build index: corpus %s holds no passages", cr.Name())
	}
	if len(docLens) > 1<<32-2 {
		return BuildStats{}, fmt.Errorf("env: build index: %d passages exceed the 32-bit id space", len(docLens))
	}
	meta := indexMeta{
		Version: indexVersion, Passages: len(docLens), TotalLen: totalLen,
		Analyzer: opts.Analyzer, Source: opts.Source, Built: time.Now().UTC(),
	}
	meta.Docs = sw.end()

	// Merge the spilled runs and the last in-memory one; terms go to disk
	// sorted, so a lookup is a binary search.
	iters := make([]runIter, 0, len(runs)+1)
	for _, r := range runs {
		fr, err := openRun(r)
		if err != nil {
			return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
		}
		defer fr.close()
		iters = append(iters, fr)
	}
	iters = append(iters, table.iter())
	if err := mergeRuns(sw, &meta, iters, docLens, docOffs); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}
	if err := writeHeader(f, &meta); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return BuildStats{}, fmt.Errorf("env: build index: %w", err)
	}
	ok = true
	skipped, reports := cr.Skipped()
	return BuildStats{
		Passages: len(docLens), Terms: meta.Terms, Postings: nPost, Skipped: skipped, Reports: reports,
		Bytes: sw.off, Runs: len(runs) + 1, Elapsed: time.Since(start),
	}, nil
}

func writeHeader(f *os.File, meta *indexMeta) error {
	js, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if 20+len(js) > indexHeaderSize {
		return fmt.Errorf("index header of %d bytes over %d", 20+len(js), indexHeaderSize)
	}
	hdr := make([]byte, indexHeaderSize)
	copy(hdr, indexMagic)
	binary.LittleEndian.PutUint32(hdr[8:], indexVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(js)))
	binary.LittleEndian.PutUint32(hdr[16:], crc32.Checksum(js, crcTable))
	copy(hdr[20:], js)
	_, err = f.WriteAt(hdr, 0)
	return err
}

// appendDocRecord stores a passage as three length-prefixed strings (id,
// title, contents), and a fourth, wikipedia_id, only when the passage has
// one: indexes of corpora without it keep the version-1 record bytes, and
// a version-1 reader of old files sees no difference.
func appendDocRecord(b []byte, p data.Passage) []byte {
	fields := []string{p.ID, p.Title, p.Contents, p.WikipediaID}
	if p.WikipediaID == "" {
		fields = fields[:3]
	}
	for _, s := range fields {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// OpenOrBuildIndex opens the index at indexPath when it was built from the
// same corpus file (same size and modification time) with the same
// analyzer, and builds it otherwise. built reports which happened.
func OpenOrBuildIndex(corpusPath, indexPath string, copts data.CorpusOptions, bopts BuildOptions, p BM25Params) (ix *Index, built bool, stats BuildStats, err error) {
	st, err := os.Stat(corpusPath)
	if err != nil {
		return nil, false, stats, fmt.Errorf("env: corpus: %w", err)
	}
	fp := CorpusFingerprint{Path: corpusPath, Size: st.Size(), ModTime: st.ModTime().UTC(), Layout: string(copts.Layout)}
	if ix, err := OpenIndex(indexPath, p); err == nil {
		m := ix.meta
		if m.Source.Size == fp.Size && m.Source.ModTime.Equal(fp.ModTime) && m.Source.Layout == fp.Layout && m.Analyzer == bopts.Analyzer {
			return ix, false, BuildStats{Passages: m.Passages, Terms: m.Terms}, nil
		}
		ix.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, stats, err // a damaged index is reported, not silently rebuilt
	}
	cr, err := data.OpenCorpus(corpusPath, copts)
	if err != nil {
		return nil, false, stats, err
	}
	defer cr.Close()
	bopts.Source = fp
	stats, err = BuildIndex(cr, indexPath, bopts)
	if err != nil {
		return nil, false, stats, err
	}
	ix, err = OpenIndex(indexPath, p)
	return ix, true, stats, err
}
