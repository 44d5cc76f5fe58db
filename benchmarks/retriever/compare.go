package main

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

// cmdCompare builds r1go's index and a bleve BM25 index over the same
// sample of the corpus and times both, build and query, in one run.
func cmdCompare(args []string) error {
	fset := flag.NewFlagSet("compare", flag.ContinueOnError)
	corpus := fset.String("corpus", "/tmp/r1go-bench/corpus.jsonl", "corpus JSONL")
	n := fset.Int("n", 100000, "passages in the sample (the first n)")
	nq := fset.Int("queries", 500, "queries to time")
	k := fset.Int("k", 5, "top-k")
	dir := fset.String("dir", "/tmp/r1go-bench", "scratch folder")
	if err := fset.Parse(args); err != nil {
		return err
	}
	header(fmt.Sprintf("compare on %d passages", *n))
	sample := filepath.Join(*dir, "sample-"+strconv.Itoa(*n)+".jsonl")
	if err := head(*corpus, sample, *n); err != nil {
		return err
	}
	qs, err := sampleQueries(sample, *nq+50, 5)
	if err != nil {
		return err
	}

	// r1go
	ownPath := sample + ".bm25"
	cr, err := data.OpenCorpus(sample, data.CorpusOptions{})
	if err != nil {
		return err
	}
	c0 := cpuTime()
	st, err := env.BuildIndex(cr, ownPath, env.BuildOptions{})
	ownCPU := cpuTime() - c0
	cr.Close()
	if err != nil {
		return err
	}
	ix, err := env.OpenIndex(ownPath, env.DefaultBM25)
	if err != nil {
		return err
	}
	defer ix.Close()
	for _, q := range qs[:50] {
		ix.Search(q, *k)
	}
	ownTop := map[string][]string{}
	ownLat, _ := timeQueries(qs[50:], func(q string) (int, error) {
		h, err := ix.Search(q, *k)
		for _, x := range h {
			ownTop[q] = append(ownTop[q], x.Passage.ID)
		}
		return len(h), err
	})

	// bleve, BM25 with the same k1 and b, English analyzer (Porter stemming,
	// stop words, possessives), contents stored so hits can be served
	search.BM25_k1, search.BM25_b = env.DefaultBM25.K1, env.DefaultBM25.B
	blevePath := filepath.Join(*dir, "bleve-"+strconv.Itoa(*n))
	os.RemoveAll(blevePath)
	m := bleve.NewIndexMapping()
	m.DefaultAnalyzer = "en"
	m.ScoringModel = "bm25"
	bidx, err := bleve.New(blevePath, m)
	if err != nil {
		return err
	}
	defer bidx.Close()
	t0, c0 := time.Now(), cpuTime()
	cr, err = data.OpenCorpus(sample, data.CorpusOptions{})
	if err != nil {
		return err
	}
	batch := bidx.NewBatch()
	for {
		p, err := cr.Next()
		if err != nil {
			break
		}
		batch.Index(p.ID, map[string]string{"contents": p.Contents})
		if batch.Size() == 1000 {
			if err := bidx.Batch(batch); err != nil {
				return err
			}
			batch.Reset()
		}
	}
	cr.Close()
	if err := bidx.Batch(batch); err != nil {
		return err
	}
	bleveBuild, bleveCPU := time.Since(t0), cpuTime()-c0
	for _, q := range qs[:50] {
		bleveSearch(bidx, q, *k)
	}
	agree, overlap := 0, 0.0
	bleveLat, _ := timeQueries(qs[50:], func(q string) (int, error) {
		ids, err := bleveSearch(bidx, q, *k)
		own := ownTop[q]
		if len(ids) > 0 && len(own) > 0 && ids[0] == own[0] {
			agree++
		}
		common := 0
		for _, a := range ids {
			for _, b := range own {
				if a == b {
					common++
				}
			}
		}
		if len(own) > 0 {
			overlap += float64(common) / float64(len(own))
		}
		return len(ids), err
	})
	nQ := float64(len(qs) - 50)
	fmt.Printf("r1go build: %s wall, %s CPU (%.0f passages/s), file %.0f MB\n", st.Elapsed.Round(time.Millisecond), ownCPU.Round(time.Millisecond), float64(st.Passages)/st.Elapsed.Seconds(), float64(st.Bytes)/1e6)
	fmt.Printf("bleve build: %s wall, %s CPU (%.0f passages/s), folder %.0f MB  -> bleve/r1go build wall %.1fx, CPU %.1fx\n",
		bleveBuild.Round(time.Millisecond), bleveCPU.Round(time.Millisecond), float64(*n)/bleveBuild.Seconds(), float64(dirSize(blevePath))/1e6,
		bleveBuild.Seconds()/st.Elapsed.Seconds(), bleveCPU.Seconds()/ownCPU.Seconds())
	fmt.Printf("r1go query: %s\n", ownLat)
	fmt.Printf("bleve query: %s  -> bleve/r1go median %.1fx, p99 %.1fx\n", bleveLat,
		float64(bleveLat.pct(50))/float64(ownLat.pct(50)), float64(bleveLat.pct(99))/float64(ownLat.pct(99)))
	fmt.Printf("agreement: same top-1 passage in %.1f%% of queries, top-%d overlap %.1f%%\n", 100*float64(agree)/nQ, *k, 100*overlap/nQ)
	return nil
}

func bleveSearch(idx bleve.Index, q string, k int) ([]string, error) {
	mq := bleve.NewMatchQuery(q)
	mq.SetField("contents")
	req := bleve.NewSearchRequestOptions(mq, k, 0, false)
	req.Fields = []string{"contents"}
	res, err := idx.Search(req)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.ID
	}
	return ids, nil
}

// head copies the first n lines of src to dst.
func head(src, dst string, n int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	for i := 0; i < n; i++ {
		line, err := r.ReadBytes('\n')
		w.Write(line)
		if err != nil {
			break
		}
	}
	return w.Flush()
}

func dirSize(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
