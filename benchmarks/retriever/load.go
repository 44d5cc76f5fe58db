package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/r1go/r1go/env"
)

// cmdLoad runs a bounded load test against a retrieval server on loopback:
// at most -requests requests and -max-duration, from -concurrency clients.
// Without -url it serves -index itself on 127.0.0.1 (server and clients
// then share the machine's cores). The denominator is the same client loop
// against GET /health, the cost of the HTTP round trip alone.
func cmdLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	index := fs.String("index", "/tmp/r1go-bench/corpus.jsonl.bm25", "index to serve in-process")
	target := fs.String("url", "", "an already running server on loopback, e.g. http://127.0.0.1:8000")
	corpus := fs.String("corpus", "/tmp/r1go-bench/corpus.jsonl", "corpus to draw queries from")
	requests := fs.Int("requests", 5000, "requests per phase (bounded)")
	conc := fs.Int("concurrency", 8, "concurrent clients")
	maxDur := fs.Duration("max-duration", 60*time.Second, "time limit per phase")
	topk := fs.Int("topk", 3, "top-k per request (Search-R1 default 3)")
	batch := fs.Int("batch", 1, "queries per request (Agent-R1 and verl send a turn's queries together)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *requests < 1 || *requests > 1000000 || *conc < 1 || *conc > 256 || *batch < 1 || *batch > 1024 {
		return errors.New("load: -requests must be 1..1e6, -concurrency 1..256, -batch 1..1024")
	}
	header("load test")
	base := *target
	if base == "" {
		ix, err := env.OpenIndex(*index, env.DefaultBM25)
		if err != nil {
			return err
		}
		defer ix.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: env.NewServer(ix, ix.Len(), env.DefaultServerConfig())}
		go srv.Serve(ln)
		defer srv.Close()
		base = "http://" + ln.Addr().String()
		fmt.Printf("serving %d passages in-process on %s\n", ix.Len(), base)
	} else {
		u, err := url.Parse(base)
		if err != nil {
			return err
		}
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("load: %s is not a loopback address; this test only runs on loopback", base)
		}
	}
	qs, err := sampleQueries(*corpus, 2000, 11)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc}, Timeout: 30 * time.Second}

	health := phase(hc, *requests, *conc, *maxDur, func(i int) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, base+"/health", nil)
	})
	retrieve := phase(hc, *requests, *conc, *maxDur, func(i int) (*http.Request, error) {
		batchQs := make([]string, *batch)
		for j := range batchQs {
			batchQs[j] = qs[(i**batch+j)%len(qs)]
		}
		body, _ := json.Marshal(map[string]any{"queries": batchQs, "topk": *topk, "return_scores": true})
		req, err := http.NewRequest(http.MethodPost, base+"/retrieve", bytes.NewReader(body))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	})
	fmt.Printf("GET /health (denominator): %s\n", health)
	fmt.Printf("POST /retrieve, %d queries per request, top-%d: %s; %.0f queries/s\n", *batch, *topk, retrieve, retrieve.rps*float64(*batch))
	fmt.Printf("retrieve throughput = %.1f%% of the bare round trip; p99 %.1fx\n",
		100*retrieve.rps/health.rps, float64(retrieve.lat.pct(99))/float64(health.lat.pct(99)))
	return nil
}

type phaseResult struct {
	n, errs int
	elapsed time.Duration
	rps     float64
	lat     latencies
}

func (p phaseResult) String() string {
	return fmt.Sprintf("%d requests in %s, %.0f req/s, %d errors, latency %s", p.n, p.elapsed.Round(time.Millisecond), p.rps, p.errs, p.lat)
}

func phase(hc *http.Client, n, conc int, limit time.Duration, mk func(int) (*http.Request, error)) phaseResult {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var res phaseResult
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local latencies
			errs := 0
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				req, err := mk(i)
				if err != nil {
					errs++
					continue
				}
				t := time.Now()
				resp, err := hc.Do(req.WithContext(ctx))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("HTTP %d", resp.StatusCode)
					}
				}
				local = append(local, time.Since(t))
				if err != nil {
					errs++
				}
			}
			mu.Lock()
			res.lat = append(res.lat, local...)
			res.errs += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.n = len(res.lat)
	res.rps = float64(res.n) / res.elapsed.Seconds()
	return res
}
