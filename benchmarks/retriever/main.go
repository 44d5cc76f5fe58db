// Command retriever benchmarks r1go's BM25 retrieval: the index build and
// query latency over a synthetic wiki-18 corpus, the same against bleve v2.5.7
// with BM25 scoring on a sample, and a bounded HTTP load test on loopback.
// Every figure comes with a denominator measured in the same run. It is a
// module of its own (go.mod beside this file), so that bleve is not a
// dependency of r1go; run it from this folder:
//
//	cd benchmarks/retriever
//	go run . gen -n 1000000 -out /tmp/r1go-bench/corpus.jsonl
//	go run . own -corpus /tmp/r1go-bench/corpus.jsonl
//	go run . compare -corpus /tmp/r1go-bench/corpus.jsonl -n 100000
//	go run . load -index /tmp/r1go-bench/corpus.jsonl.bm25 -requests 5000
//
// The corpus is generated, never downloaded: Zipf-distributed synthetic
// words (the 33 most frequent ranks are English stop words, as in real
// text), 100 words a passage as in wiki-18, quoted title on the first line.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: retriever gen|own|query|compare|load [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = cmdGen(os.Args[2:])
	case "own":
		err = cmdOwn(os.Args[2:])
	case "query":
		err = cmdQuery(os.Args[2:])
	case "compare":
		err = cmdCompare(os.Args[2:])
	case "load":
		err = cmdLoad(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retriever benchmark:", err)
		os.Exit(1)
	}
}

var stopRanks = strings.Fields("the of and in to a is was as for by on with that at from his it an were are which this be or their also has its had not")

var syllables = strings.Fields("ka ri to na mi lo se vu da pe chi zo mar ten bel gor sti lan ver qua")

// word is the synthetic word of Zipf rank k; the first ranks are real
// English function words.
func word(k uint64) string {
	if k < uint64(len(stopRanks)) {
		return stopRanks[k]
	}
	var b strings.Builder
	k -= uint64(len(stopRanks))
	for {
		b.WriteString(syllables[k%uint64(len(syllables))])
		k /= uint64(len(syllables))
		if k == 0 {
			break
		}
	}
	return b.String()
}

func cmdGen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	n := fs.Int("n", 1000000, "passages")
	out := fs.String("out", "/tmp/r1go-bench/corpus.jsonl", "output file (keep it out of the repository)")
	words := fs.Int("words", 100, "words per passage")
	vocab := fs.Uint64("vocab", 2000000, "Zipf vocabulary size")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(*seed, 2))
	zipf := rand.NewZipf(r, 1.1, 2, *vocab-1)
	var sb strings.Builder
	start := time.Now()
	for i := 0; i < *n; i++ {
		sb.Reset()
		tw := 1 + r.IntN(3)
		title := make([]string, tw)
		for j := range title {
			t := word(uint64(len(stopRanks)) + uint64(r.IntN(200000)))
			title[j] = strings.ToUpper(t[:1]) + t[1:]
		}
		ttl := strings.Join(title, " ")
		sb.WriteString(ttl)
		for j := 0; j < *words; j++ {
			sb.WriteByte(' ')
			sb.WriteString(word(zipf.Uint64()))
			if r.IntN(12) == 0 {
				sb.WriteByte(',')
			}
		}
		sb.WriteByte('.')
		line, _ := json.Marshal(map[string]string{"id": strconv.Itoa(i), "contents": `"` + ttl + `"` + "\n" + sb.String()})
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	st, _ := f.Stat()
	fmt.Printf("wrote %d passages, %.1f MB, to %s in %s\n", *n, float64(st.Size())/1e6, *out, time.Since(start).Round(time.Millisecond))
	return nil
}

// procStatus reads a memory figure (kB) from /proc/self/status.
func procStatus(key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return -1
}

func mb(kb int64) string { return fmt.Sprintf("%.0f MB", float64(kb)/1024) }

// latencies summarises durations.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

func (l latencies) String() string {
	return fmt.Sprintf("median %s, p90 %s, p99 %s (n=%d)", l.pct(50).Round(time.Microsecond), l.pct(90).Round(time.Microsecond), l.pct(99).Round(time.Microsecond), len(l))
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func header(name string) {
	fmt.Printf("== %s: GOMAXPROCS=%d, NumCPU=%d, load average %s\n", name, runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())
}

// sampleQueries draws n queries of 4 to 8 words from passages among the
// first 100k of the corpus, so every query has relevant passages.
func sampleQueries(corpus string, n int, seed uint64) ([]string, error) {
	f, err := os.Open(corpus)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() && len(texts) < 100000 {
		var rec struct{ Contents string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			_, body, _ := strings.Cut(rec.Contents, "\n")
			texts = append(texts, body)
		}
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("no passages in %s", corpus)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	qs := make([]string, n)
	for i := range qs {
		ws := strings.Fields(texts[r.IntN(len(texts))])
		m := 4 + r.IntN(5)
		q := make([]string, m)
		for j := range q {
			q[j] = strings.Trim(ws[r.IntN(len(ws))], ",.")
		}
		qs[i] = strings.Join(q, " ")
	}
	return qs, nil
}
