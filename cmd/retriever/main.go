// Command retriever builds a BM25 index from a wiki-18 or KILT JSONL corpus
// (once; later runs reuse the index file) and serves it over HTTP with the
// APIs the RL trainers call:
//
//	POST /retrieve  {"queries": [...], "topk": 3, "return_scores": true}   Search-R1, verl
//	POST /search    {"queries": [...], "top_k": 5}                         Agent-R1
//	GET  /search?query=...&top_k=5                                         Agent-R1
//	GET  /health
//
// It listens on 127.0.0.1:8000 by default, the address Search-R1's and
// Agent-R1's tools expect; pass -addr to listen elsewhere.
//
//	go run ./cmd/retriever -corpus wiki-18.jsonl.gz
//	go run ./cmd/retriever -corpus kilt.jsonl -layout kilt -index /data/kilt.bm25 -build-only
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

type config struct {
	corpus, layout, index, addr string
	skipMalformed, rebuild      bool
	buildOnly                   bool
	noStem, noStop              bool
	workers                     int
	bm25                        env.BM25Params
	server                      env.ServerConfig
}

func parseFlags(args []string) (config, error) {
	c := config{bm25: env.DefaultBM25, server: env.DefaultServerConfig()}
	fs := flag.NewFlagSet("retriever", flag.ContinueOnError)
	fs.StringVar(&c.corpus, "corpus", "", "corpus JSONL file (.gz allowed), wiki-18 or KILT layout (required)")
	fs.StringVar(&c.layout, "layout", "auto", "corpus layout: auto, wiki18, kilt or kilt-source")
	fs.StringVar(&c.index, "index", "", "index file (default: <corpus>.bm25); reused when it matches the corpus")
	fs.BoolVar(&c.rebuild, "rebuild", false, "build the index even if a matching one exists")
	fs.BoolVar(&c.buildOnly, "build-only", false, "build (or check) the index and exit")
	fs.BoolVar(&c.skipMalformed, "skip-malformed", false, "skip malformed corpus lines (the first 100 are logged, all are counted) instead of stopping")
	fs.BoolVar(&c.noStem, "no-stem", false, "index without Porter stemming")
	fs.BoolVar(&c.noStop, "no-stopwords", false, "index English stop words too")
	fs.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "goroutines analysing text while building")
	fs.Float64Var(&c.bm25.K1, "k1", c.bm25.K1, "BM25 k1")
	fs.Float64Var(&c.bm25.B, "b", c.bm25.B, "BM25 b")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8000", "listen address (loopback by default)")
	fs.IntVar(&c.server.DefaultTopK, "topk", c.server.DefaultTopK, "top-k when a request names none")
	fs.IntVar(&c.server.MaxTopK, "max-topk", c.server.MaxTopK, "largest top-k a request may ask")
	fs.IntVar(&c.server.MaxQueries, "max-queries", c.server.MaxQueries, "most queries in one request")
	fs.IntVar(&c.server.MaxQueryChars, "max-query-chars", c.server.MaxQueryChars, "longest query in characters")
	fs.Int64Var(&c.server.MaxBodyBytes, "max-body", c.server.MaxBodyBytes, "largest request body in bytes")
	fs.IntVar(&c.server.MaxConcurrent, "max-concurrent", 0, "searches in flight (0: 2 x GOMAXPROCS)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.corpus == "" {
		fs.Usage()
		return c, errors.New("retriever: -corpus is required")
	}
	if c.index == "" {
		c.index = c.corpus + ".bm25"
	}
	if c.server.DefaultTopK < 1 || c.server.DefaultTopK > c.server.MaxTopK {
		return c, fmt.Errorf("retriever: -topk %d must be in 1..-max-topk (%d)", c.server.DefaultTopK, c.server.MaxTopK)
	}
	return c, nil
}

func openIndex(c config) (*env.Index, error) {
	layout, err := data.ParseCorpusLayout(c.layout)
	if err != nil {
		return nil, err
	}
	copts := data.CorpusOptions{Layout: layout, SkipMalformed: c.skipMalformed}
	bopts := env.BuildOptions{
		Analyzer: env.AnalyzerConfig{NoStem: c.noStem, NoStopWords: c.noStop},
		Workers:  c.workers,
		Progress: func(n int) { log.Printf("indexed %d passages", n) },
	}
	if c.rebuild {
		if err := os.Remove(c.index); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("retriever: %w", err)
		}
	}
	ix, built, st, err := env.OpenOrBuildIndex(c.corpus, c.index, copts, bopts, c.bm25)
	if err != nil {
		return nil, err
	}
	if built {
		for _, r := range st.Reports {
			log.Printf("skipped: %v", r)
		}
		if st.Skipped > len(st.Reports) {
			log.Printf("skipped %d more malformed lines", st.Skipped-len(st.Reports))
		}
		log.Printf("built %s: %d passages, %d terms, %d postings, %d skipped lines, %.1f MB, %s",
			c.index, st.Passages, st.Terms, st.Postings, st.Skipped, float64(st.Bytes)/1e6, st.Elapsed.Round(time.Millisecond))
	} else {
		log.Printf("reusing %s: %d passages, %d terms", c.index, ix.Len(), ix.Terms())
	}
	log.Printf("index tables in memory: %.1f MB (passages are read from the file)", float64(ix.MemoryBytes())/1e6)
	return ix, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// run builds or opens the index and serves until ctx ends; onListen, when
// set, learns the bound address (tests listen on port 0).
func run(ctx context.Context, args []string, onListen func(addr string)) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	ix, err := openIndex(c)
	if err != nil {
		return err
	}
	defer ix.Close()
	if c.buildOnly {
		return nil
	}
	if !isLoopback(c.addr) {
		log.Printf("warning: listening on %s, which is not a loopback address; the server has no authentication", c.addr)
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("retriever: %w", err)
	}
	srv := &http.Server{
		Handler:           env.NewServer(ix, ix.Len(), c.server),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Printf("serving %d passages on http://%s (POST /retrieve, POST|GET /search, GET /health)", ix.Len(), ln.Addr())
	if onListen != nil {
		onListen(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("retriever: %w", err)
	case <-ctx.Done():
	}
	log.Printf("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func main() {
	log.SetFlags(log.LstdFlags)
	log.SetPrefix("retriever: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		log.Print(err)
		os.Exit(2)
	}
}
