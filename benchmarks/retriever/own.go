package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

// cmdOwn measures r1go's index on the whole corpus: build time against the
// time to only read and parse the corpus, then query latency.
func cmdOwn(args []string) error {
	fs := flag.NewFlagSet("own", flag.ContinueOnError)
	corpus := fs.String("corpus", "/tmp/r1go-bench/corpus.jsonl", "corpus JSONL")
	index := fs.String("index", "", "index file (default <corpus>.bm25)")
	nq := fs.Int("queries", 1000, "queries to time")
	k := fs.Int("k", 5, "top-k")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "build workers")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the build here")
	budget := fs.Int64("budget", 0, "postings memory budget of the build in MiB (0: the default 256)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *index == "" {
		*index = *corpus + ".bm25"
	}
	header("own BM25 index")

	// denominator: one streaming pass that only reads and parses the corpus
	t0, c0 := time.Now(), cpuTime()
	cr, err := data.OpenCorpus(*corpus, data.CorpusOptions{})
	if err != nil {
		return err
	}
	n := 0
	for {
		if _, err := cr.Next(); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		n++
	}
	cr.Close()
	parse, parseCPU := time.Since(t0), cpuTime()-c0
	fmt.Printf("read+parse corpus: %d passages in %s wall, %s CPU (%.0f passages/s)\n", n, parse.Round(time.Millisecond), parseCPU.Round(time.Millisecond), float64(n)/parse.Seconds())

	cr, err = data.OpenCorpus(*corpus, data.CorpusOptions{})
	if err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
	}
	c0 = cpuTime()
	st, err := env.BuildIndex(cr, *index, env.BuildOptions{Workers: *workers, MemoryBudget: *budget << 20})
	buildCPU := cpuTime() - c0
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	cr.Close()
	if err != nil {
		return err
	}
	fmt.Printf("build: %d runs merged\n", st.Runs)
	fmt.Printf("build: %d passages, %d terms, %d postings in %s wall (%.0f passages/s) = %.2f x read+parse wall; %s CPU = %.2f x read+parse CPU; file %.0f MB; peak RSS %s\n",
		st.Passages, st.Terms, st.Postings, st.Elapsed.Round(time.Millisecond), float64(st.Passages)/st.Elapsed.Seconds(),
		st.Elapsed.Seconds()/parse.Seconds(), buildCPU.Round(time.Millisecond), buildCPU.Seconds()/parseCPU.Seconds(), float64(st.Bytes)/1e6, mb(procStatus("VmHWM")))

	debug.FreeOSMemory()
	rssBefore := procStatus("VmRSS")
	t0 = time.Now()
	ix, err := env.OpenIndex(*index, env.DefaultBM25)
	if err != nil {
		return err
	}
	defer ix.Close()
	open := time.Since(t0)
	debug.FreeOSMemory()
	fmt.Printf("open: %s; in-memory tables %.0f MB; RSS %s -> %s\n", open.Round(time.Millisecond),
		float64(ix.MemoryBytes())/1e6, mb(rssBefore), mb(procStatus("VmRSS")))

	qs, err := sampleQueries(*corpus, *nq+100, 3)
	if err != nil {
		return err
	}
	for _, q := range qs[:100] { // warm-up: page cache, scratch buffers
		ix.Search(q, *k)
	}
	c0 = cpuTime()
	lat, hits := timeQueries(qs[100:], func(q string) (int, error) {
		h, err := ix.Search(q, *k)
		return len(h), err
	})
	qcpu := (cpuTime() - c0) / time.Duration(len(lat))
	fmt.Printf("query (1 goroutine, top-%d, passages read from the file): %s; mean CPU per query %s; mean hits %.2f\n", *k, lat, qcpu.Round(time.Microsecond), hits)
	fmt.Printf("peak RSS of the whole run %s\n", mb(procStatus("VmHWM")))
	return nil
}

func timeQueries(qs []string, search func(string) (int, error)) (latencies, float64) {
	lat := make(latencies, 0, len(qs))
	total := 0
	for _, q := range qs {
		t := time.Now()
		n, err := search(q)
		lat = append(lat, time.Since(t))
		if err != nil {
			fmt.Fprintln(os.Stderr, "query error:", err)
		}
		total += n
	}
	return lat, float64(total) / float64(len(qs))
}
