// Command serve measures the OpenAI-compatible endpoint (rl/serve) against
// the same continuous-batching engine driven in-process: requests per
// second and p50/p99 latency at 1, 8 and 64 concurrent clients, each
// client sending its next request when the last is answered (a bounded,
// closed-loop load), on loopback. Both paths render the same chat prompt
// and sample the same tokens (same seeds, max_tokens), so the ratio of
// their times is the cost of HTTP, JSON and the server's request handling.
//
//	go run ./benchmarks/serve [-model cmd/train/testdata/warmstart] [-tokens 32] [-rounds 3]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/serve"
)

const question = "Question: Who is the founder of the employer of Disonrar?\nSearch for every fact you need, then answer in <answer></answer>."

const searchTool = `{"type": "function", "function": {"name": "search", "description": "Search for information on the internet using Wikipedia as a knowledge source.", "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "Search query"}}, "required": ["query"]}}}`

type result struct {
	rps      float64
	p50, p99 time.Duration
	tokens   int
}

func main() {
	dir := flag.String("model", "cmd/train/testdata/warmstart", "model folder (default: the tiny default policy's warm start)")
	maxTokens := flag.Int("tokens", 32, "completion tokens per request at most")
	rounds := flag.Int("rounds", 3, "alternating rounds of both paths; the median is reported")
	device := devsel.Flag(flag.CommandLine)
	flag.Parse()
	dev, err := devsel.Pick(*device, os.Stderr)
	check(err)
	m, err := model.Load(*dir, dev, model.LMHeadOutput)
	check(err)
	tok, err := tokenizer.Load(*dir)
	check(err)
	eng := rl.NewEngine(rl.NewModelPolicy(m, 64, 512), 0)
	defer eng.Close()
	srv, err := serve.New(serve.DefaultConfig(), eng, tok)
	check(err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go http.Serve(ln, srv)
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	tools := []json.RawMessage{json.RawMessage(searchTool)}
	stop := []int32{}
	for _, s := range []string{"</tool_call>", "<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(s); ok {
			stop = append(stop, int32(id))
		}
	}

	inproc := func(seed int) (int, error) {
		ids, err := tok.EncodeChat([]tokenizer.Message{{Role: "user", Content: question}}, tools, true)
		if err != nil {
			return 0, err
		}
		p := make([]int32, len(ids))
		for i, id := range ids {
			p[i] = int32(id)
		}
		g, err := eng.Generate(context.Background(), rl.GenRequest{Prompt: p, Sampling: model.Sampling{Temperature: 1, TopP: 1, TopK: -1},
			Seed: uint64(seed), MaxTokens: *maxTokens, Stop: stop}, nil)
		if err != nil {
			return 0, err
		}
		return len(g.Tokens), nil
	}
	overHTTP := func(seed int) (int, error) {
		body, _ := json.Marshal(map[string]any{"model": "r1go", "messages": []map[string]string{{"role": "user", "content": question}},
			"tools": tools, "max_tokens": *maxTokens, "seed": seed})
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
		}
		var c serve.ChatCompletion
		if err := json.Unmarshal(raw, &c); err != nil {
			return 0, err
		}
		return c.Usage.CompletionTokens, nil
	}

	// Warm both paths.
	for i := 0; i < 4; i++ {
		_, err := inproc(i)
		check(err)
		_, err = overHTTP(i)
		check(err)
	}
	host, _ := os.Hostname()
	fmt.Printf("model %s (%d parameters), %d completion tokens at most, temperature 1, %d slots, host %s, %s\n",
		*dir, m.NumParams(), *maxTokens, eng.Slots(), host, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("%-6s %-10s %9s %9s %9s %8s | %12s %10s\n", "conc", "path", "req/s", "p50 ms", "p99 ms", "tok/req", "HTTP/inproc", "(time)")
	for _, conc := range []int{1, 8, 64} {
		n := max(16, 4*conc)
		var ins, hs []result
		for r := 0; r < *rounds; r++ {
			ins = append(ins, load(conc, n, inproc))
			hs = append(hs, load(conc, n, overHTTP))
		}
		in, h := median(ins), median(hs)
		fmt.Printf("%-6d %-10s %9.1f %9.1f %9.1f %8.1f |\n", conc, "in-process", in.rps, ms(in.p50), ms(in.p99), float64(in.tokens)/float64(n))
		fmt.Printf("%-6d %-10s %9.1f %9.1f %9.1f %8.1f | %12.3f %10s\n", conc, "HTTP", h.rps, ms(h.p50), ms(h.p99), float64(h.tokens)/float64(n),
			in.rps/h.rps, "p50 ×"+fmt.Sprintf("%.3f", float64(h.p50)/float64(in.p50)))
	}
}

// load runs n requests from conc clients, each sending its next request
// when its last one is answered; request i uses seed i.
func load(conc, n int, do func(seed int) (int, error)) result {
	var (
		mu     sync.Mutex
		next   int
		lat    []time.Duration
		tokens int
		wg     sync.WaitGroup
	)
	start := time.Now()
	for c := 0; c < conc; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				t0 := time.Now()
				k, err := do(i)
				check(err)
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				tokens += k
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	return result{rps: float64(n) / el.Seconds(), p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)], tokens: tokens}
}

func median(rs []result) result {
	sort.Slice(rs, func(i, j int) bool { return rs[i].rps < rs[j].rps })
	return rs[len(rs)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve benchmark:", err)
		os.Exit(1)
	}
}
