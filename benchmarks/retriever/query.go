package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/r1go/r1go/env"
)

// cmdQuery times queries against an existing index, the build left out.
func cmdQuery(args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	corpus := fs.String("corpus", "/tmp/r1go-bench/corpus.jsonl", "corpus the queries are drawn from")
	index := fs.String("index", "", "index file (default <corpus>.bm25)")
	nq := fs.Int("queries", 1000, "queries to time")
	k := fs.Int("k", 5, "top-k")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the timed queries here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *index == "" {
		*index = *corpus + ".bm25"
	}
	header("query an existing index")
	ix, err := env.OpenIndex(*index, env.DefaultBM25)
	if err != nil {
		return err
	}
	defer ix.Close()
	qs, err := sampleQueries(*corpus, *nq+100, 3)
	if err != nil {
		return err
	}
	for _, q := range qs[:100] {
		ix.Search(q, *k)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	c0 := cpuTime()
	lat, hits := timeQueries(qs[100:], func(q string) (int, error) {
		h, err := ix.Search(q, *k)
		return len(h), err
	})
	qcpu := (cpuTime() - c0) / time.Duration(len(lat))
	fmt.Printf("%d passages: query (1 goroutine, top-%d): %s; mean CPU per query %s; mean hits %.2f\n", ix.Len(), *k, lat, qcpu.Round(time.Microsecond), hits)
	return nil
}
