// Command tokenizer measures encode throughput of model/tokenizer on one
// core and on all cores, beside @huggingface/transformers (Node.js) and the
// Rust Hugging Face tokenizers library (its Node.js binding; one document
// per call, and encodeBatch on all cores) on the same corpus and tokenizer
// in the same run:
//
//	go run ./benchmarks/tokenizer [-tokenizer DIR] [-mb 8] [-rounds 3]
//
// Without -tokenizer it trains a Qwen2-style tokenizer (-train-vocab
// tokens) on the corpus first and measures both sides with that file.
// The corpus is the repository's own Go and Markdown files (English prose
// and code) plus the 3,327 multilingual golden strings of model/tokenizer,
// repeated up to -mb megabytes, one document per file or string. Each side
// encodes everything once to warm its cache, then -rounds times; the best
// round counts. Both sides must produce the same number of ids. The Node
// side needs `npm ci --ignore-scripts` in benchmarks/tokenizer (the command
// runs it when node_modules is missing).
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/r1go/r1go/model/tokenizer"
)

func main() {
	dir := flag.String("tokenizer", "", "tokenizer folder (default: train one on the corpus)")
	trainVocab := flag.Int("train-vocab", 32000, "without -tokenizer: vocabulary size of the tokenizer trained on the corpus")
	mb := flag.Float64("mb", 8, "corpus size in megabytes")
	rounds := flag.Int("rounds", 3, "timed rounds per measurement (best counts)")
	skipNode := flag.Bool("skip-node", false, "do not run the @huggingface/transformers side")
	flag.Parse()
	if _, err := os.Stat("go.mod"); err != nil {
		log.Fatal("run from the repository root")
	}
	docs, size := corpus(int(*mb * (1 << 20)))
	if *dir == "" {
		// A Qwen2-style tokenizer trained on the corpus itself: a larger
		// vocabulary than the 3,000-token test fixture, so merge chains are
		// closer to a real model's.
		t0 := time.Now()
		trained, err := tokenizer.Train(docs, *trainVocab, tokenizer.TrainOptions{})
		if err != nil {
			log.Fatal(err)
		}
		tmp, err := os.MkdirTemp("", "tokenizer-bench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		if err := trained.Save(tmp); err != nil {
			log.Fatal(err)
		}
		*dir = tmp
		fmt.Printf("trained a Qwen2-style tokenizer on the corpus in %.1f s\n", time.Since(t0).Seconds())
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("tokenizer %s (%d ids), corpus %d documents, %.2f MB, %d CPUs (GOMAXPROCS %d)\n",
		*dir, tok.VocabSize(), len(docs), float64(size)/1e6, runtime.NumCPU(), runtime.GOMAXPROCS(0))

	mbps := func(sec float64) float64 { return float64(size) / 1e6 / sec }

	procs := runtime.GOMAXPROCS(1)
	oneIDs, one, oneCPU := best(*rounds, func() int {
		n := 0
		for _, d := range docs {
			n += len(tok.Encode(d))
		}
		return n
	})
	runtime.GOMAXPROCS(procs)
	allIDs, all, allCPU := best(*rounds, func() int {
		n := 0
		for _, ids := range tok.EncodeBatch(docs) {
			n += len(ids)
		}
		return n
	})
	if oneIDs != allIDs {
		log.Fatalf("one core gave %d ids, all cores %d", oneIDs, allIDs)
	}
	fmt.Printf("%-27s %8.2f MB/s  %8.2f MB/CPU-s  (%.3f s, %d ids)\n", "go, 1 core:", mbps(one), mbps(oneCPU), one, oneIDs)
	fmt.Printf("%-27s %8.2f MB/s  %8.2f MB/CPU-s  (%.3f s, %.2fx one core)\n", fmt.Sprintf("go, %d cores:", runtime.GOMAXPROCS(0)), mbps(all), mbps(allCPU), all, one/all)
	if *skipNode {
		return
	}
	for _, peer := range []struct{ mode, name string }{
		{"js", "transformers.js"},
		{"rust", "Rust tokenizers, 1 core"},
		{"rust-batch", "Rust tokenizers, all cores"},
	} {
		sec, cpu, ids, err := runNode(peer.mode, *dir, docs, *rounds)
		if err != nil {
			log.Print(err)
			os.Exit(1)
		}
		if ids != oneIDs {
			log.Fatalf("%s gave %d ids, Go %d", peer.name, ids, oneIDs)
		}
		fmt.Printf("%-27s %8.2f MB/s  %8.2f MB/CPU-s  (%.3f s)  go 1 core: %.2fx wall, %.2fx CPU; go all cores: %.2fx wall\n",
			peer.name+":", mbps(sec), mbps(cpu), sec, sec/one, cpu/oneCPU, sec/all)
	}
}

// best runs f once to warm up, then rounds times, and returns its result,
// the fastest wall time and the least CPU time of a round, in seconds. CPU
// time counts every thread of the process, so on a machine shared with
// other work it says what the encoder costs, where wall time also says
// how much of the machine it got.
func best(rounds int, f func() int) (n int, wall, cpu float64) {
	n = f()
	for r := 0; r < rounds; r++ {
		t0, c0 := time.Now(), cpuSeconds()
		f()
		w, c := time.Since(t0).Seconds(), cpuSeconds()-c0
		if r == 0 || w < wall {
			wall = w
		}
		if r == 0 || c < cpu {
			cpu = c
		}
	}
	return n, wall, cpu
}

func corpus(limit int) ([]string, int) {
	var texts []string
	var paths []string
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md")) {
			paths = append(paths, path)
		}
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			texts = append(texts, string(data))
		}
	}
	f, err := os.Open("model/tokenizer/testdata/golden/strings.jsonl.gz")
	if err != nil {
		log.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil && s != "" {
			texts = append(texts, s)
		}
	}
	f.Close()
	var docs []string
	size := 0
	for size < limit {
		for _, t := range texts {
			if size >= limit {
				break
			}
			docs = append(docs, t)
			size += len(t)
		}
	}
	return docs, size
}

func runNode(mode, dir string, docs []string, rounds int) (wall, cpu float64, ids int, err error) {
	bench := filepath.Join("benchmarks", "tokenizer")
	if _, err := os.Stat(filepath.Join(bench, "node_modules")); err != nil {
		install := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		install.Dir, install.Stdout, install.Stderr = bench, os.Stderr, os.Stderr
		if err := install.Run(); err != nil {
			return 0, 0, 0, fmt.Errorf("npm ci in %s: %v", bench, err)
		}
	}
	tmp, err := os.CreateTemp("", "tokenizer-corpus-*.jsonl")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	for _, d := range docs {
		line, _ := json.Marshal(d)
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return 0, 0, 0, err
	}
	tmp.Close()
	abs, _ := filepath.Abs(dir)
	out, err := exec.Command("node", filepath.Join(bench, "encode.mjs"), mode, abs, tmp.Name(), fmt.Sprint(rounds)).Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("node encode.mjs %s: %v", mode, err)
	}
	var res struct {
		Seconds    float64 `json:"seconds"`
		CPUSeconds float64 `json:"cpu_seconds"`
		IDs        int     `json:"ids"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, 0, 0, fmt.Errorf("node output %q: %v", out, err)
	}
	return res.Seconds, res.CPUSeconds, res.IDs, nil
}
