// Command retriever builds a BM25 index from a wiki-18 or KILT corpus,
// JSONL or parquet (once; later runs reuse the index file) and serves it
// over HTTP with the APIs the RL trainers call:
//
//	POST /retrieve  {"queries": [...], "topk": 3, "return_scores": true}   Search-R1, verl
//	POST /search    {"queries": [...], "top_k": 5} or {"query": ...}       Agent-R1
//	GET  /search?query=...&top_k=5                                         Agent-R1
//	GET  /health    {"status": "healthy"}; 503 while the index loads
//
// Settings come from -config FILE.yaml, key=value and -key value, as for
// the other commands (-h lists them).
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

	cfgpkg "github.com/r1go/r1go/cmd/internal/config"
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

// Config is the command's settings: -config FILE.yaml, key=value and
// -key value set them as for the other commands; the keys keep the names
// the flags always had.
type Config struct {
	Corpus        string  `yaml:"corpus" help:"corpus file: wiki-18 or KILT JSONL (gzip allowed) or parquet (required)"`
	Layout        string  `yaml:"layout" help:"corpus layout: auto, wiki18, kilt or kilt-source"`
	Index         string  `yaml:"index" help:"index file (default: <corpus>.bm25); reused when it matches the corpus"`
	Rebuild       bool    `yaml:"rebuild" help:"build the index even if a matching one exists"`
	BuildOnly     bool    `yaml:"build-only" help:"build (or check) the index and exit"`
	SkipMalformed bool    `yaml:"skip-malformed" help:"skip malformed corpus lines (the first 100 are logged, all are counted) instead of stopping"`
	NoStem        bool    `yaml:"no-stem" help:"index without Porter stemming"`
	NoStopWords   bool    `yaml:"no-stopwords" help:"index English stop words too"`
	Workers       int     `yaml:"workers" help:"goroutines analysing text while building"`
	K1            float64 `yaml:"k1" help:"BM25 k1"`
	B             float64 `yaml:"b" help:"BM25 b"`
	Addr          string  `yaml:"addr" help:"listen address (loopback by default)"`
	TopK          int     `yaml:"topk" help:"top-k when a request names none"`
	MaxTopK       int     `yaml:"max-topk" help:"largest top-k a request may ask"`
	MaxQueries    int     `yaml:"max-queries" help:"most queries in one request"`
	MaxQueryChars int     `yaml:"max-query-chars" help:"longest query in characters"`
	MaxBody       int64   `yaml:"max-body" help:"largest request body in bytes"`
	MaxConcurrent int     `yaml:"max-concurrent" help:"searches in flight (0: 2 x GOMAXPROCS)"`
}

// DefaultConfig is Search-R1's server setting: top 3, 127.0.0.1:8000.
func DefaultConfig() Config {
	s := env.DefaultServerConfig()
	return Config{Layout: "auto", Workers: runtime.GOMAXPROCS(0), K1: env.DefaultBM25.K1, B: env.DefaultBM25.B,
		Addr: "127.0.0.1:8000", TopK: s.DefaultTopK, MaxTopK: s.MaxTopK, MaxQueries: s.MaxQueries,
		MaxQueryChars: s.MaxQueryChars, MaxBody: s.MaxBodyBytes}
}

// Validate checks what no single key can.
func (c *Config) Validate() error {
	if c.Corpus == "" {
		return errors.New("corpus is required (-corpus FILE, corpus=FILE or corpus: in -config)")
	}
	if c.TopK < 1 || c.TopK > c.MaxTopK {
		return fmt.Errorf("topk %d must be in 1..max-topk (%d)", c.TopK, c.MaxTopK)
	}
	return nil
}

func parseFlags(args []string) (config, error) {
	cfg := DefaultConfig()
	if err := cfgpkg.Load(&cfg, args, nil); err != nil {
		if errors.Is(err, cfgpkg.ErrHelp) {
			fmt.Fprintln(os.Stderr, "usage: retriever [-config FILE.yaml] [key=value | -key value]...")
			cfgpkg.Help(os.Stderr, &cfg)
			return config{}, flag.ErrHelp
		}
		return config{}, fmt.Errorf("retriever: %w", err)
	}
	c := config{corpus: cfg.Corpus, layout: cfg.Layout, index: cfg.Index, addr: cfg.Addr,
		skipMalformed: cfg.SkipMalformed, rebuild: cfg.Rebuild, buildOnly: cfg.BuildOnly,
		noStem: cfg.NoStem, noStop: cfg.NoStopWords, workers: cfg.Workers,
		bm25: env.BM25Params{K1: cfg.K1, B: cfg.B},
		server: env.ServerConfig{DefaultTopK: cfg.TopK, MaxTopK: cfg.MaxTopK, MaxQueries: cfg.MaxQueries,
			MaxQueryChars: cfg.MaxQueryChars, MaxBodyBytes: cfg.MaxBody, MaxConcurrent: cfg.MaxConcurrent}}
	if c.index == "" {
		c.index = c.corpus + ".bm25"
	}
	return c, nil
}

func openIndex(c config) (*env.Index, error) {
	layout, err := data.ParseCorpusLayout(c.layout)
	if err != nil {
		return nil, err
	}
	copts := data.CorpusOptions{Layout: layout, SkipMalformed: c.skipMalformed}
	start := time.Now()
	bopts := env.BuildOptions{
		Analyzer: env.AnalyzerConfig{NoStem: c.noStem, NoStopWords: c.noStop},
		Workers:  c.workers,
		Progress: func(n int) {
			el := time.Since(start)
			log.Printf("indexing %s: %d passages in %s (%.0f passages/s)", c.corpus, n, el.Round(time.Second), float64(n)/el.Seconds())
		},
	}
	log.Printf("opening %s for %s (built when missing, stale or -rebuild)", c.index, c.corpus)
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
// set, learns the bound address once the index serves (tests listen on
// port 0). The server
// listens before the index is ready: GET /health answers 503 "loading"
// while it builds, as Agent-R1's launch scripts expect when they poll it.
func run(ctx context.Context, args []string, onListen func(addr string)) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	if c.buildOnly {
		ix, err := openIndex(c)
		if err != nil {
			return err
		}
		return ix.Close()
	}
	if !isLoopback(c.addr) {
		log.Printf("warning: listening on %s, which is not a loopback address; the server has no authentication", c.addr)
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("retriever: %w", err)
	}
	handler := env.NewServer(nil, 0, c.server)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Printf("listening on http://%s; /health answers 503 until the index is ready", ln.Addr())
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
	ix, err := openIndex(c)
	if err != nil {
		stop()
		return err
	}
	defer ix.Close()
	handler.Ready(ix, ix.Len())
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
	return stop()
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
