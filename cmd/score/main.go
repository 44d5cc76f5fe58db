// Command score writes each token's logprob and entropy under a model.
//
//	go run ./cmd/score -model DIR -input FILE.jsonl [-output OUT.jsonl]
//
// Each input line is {"tokens": [ids...]} or, when the model folder (or
// -tokenizer) holds a tokenizer.json, {"text": "..."}. Each output line is
//
//	{"line": N, "tokens": [...], "logprob": [...], "entropy": [...], "sum_logprob": S, "next_entropy": H}
//
// where logprob[i] = log p(tokens[i+1] | tokens[..i]) and entropy[i] is the
// entropy of the next-token distribution after tokens[..i]; both have
// len(tokens)-1 entries, so a one-token line gets empty lists. next_entropy
// is the entropy of the distribution after the whole line (a one-token
// line's only one). Lines are packed into batches of up to -batch-tokens
// tokens. A malformed line stops the run with its line number, or is
// reported and skipped under -skip-bad.
//
// -device auto|cpu|cuda picks the device (cuda.Pick); the memory plan is
// printed on stderr before the weights load, and the run stops there when
// it does not fit (-device_memory plans for another capacity, -dry_run only
// prints it and needs nothing but config.json). These are the device keys
// of every command (internal/devsel).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	cfgpkg "github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/cmd/internal/weights"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
)

type inputLine struct {
	Tokens []int32 `json:"tokens"`
	Text   *string `json:"text"`
}

type outputLine struct {
	Line       int       `json:"line"`
	Tokens     []int32   `json:"tokens"`
	LogProb    []float32 `json:"logprob"`
	Entropy    []float32 `json:"entropy"`
	SumLogProb float64   `json:"sum_logprob"`
	// NextEntropy is the entropy of the next-token distribution after the
	// last token.
	NextEntropy float32 `json:"next_entropy"`
}

// Config is the command's settings: -config FILE.yaml, key=value and
// -key value set them as for the other commands (cmd/internal/config); the
// keys keep the names the flags always had.
type Config struct {
	Model       string `yaml:"model" help:"Hugging Face model folder (config.json + safetensors; required)"`
	Input       string `yaml:"input" help:"input JSONL file (- for standard input)"`
	Output      string `yaml:"output" help:"output JSONL file (- for standard output)"`
	Tokenizer   string `yaml:"tokenizer" help:"folder with tokenizer.json for {\"text\": ...} lines (default: the model folder)"`
	BatchTokens int    `yaml:"batch-tokens" help:"tokens per packed forward pass"`
	SkipBad     bool   `yaml:"skip-bad" help:"report malformed lines on stderr and go on"`
	// Device is the section every command shares: device, device_memory,
	// dry_run.
	Device devsel.Config `yaml:",inline"`
}

// DefaultConfig reads standard input and writes standard output.
func DefaultConfig() Config {
	return Config{Input: "-", Output: "-", BatchTokens: 4096, Device: devsel.Default()}
}

// Validate checks what no single key can.
func (c *Config) Validate() error {
	if c.Model == "" {
		return errors.New("model is required (-model DIR, model=DIR or model: in -config)")
	}
	if c.BatchTokens < 1 {
		return fmt.Errorf("batch-tokens %d must be ≥ 1", c.BatchTokens)
	}
	return c.Device.Validate()
}

// parseArgs reads the settings; flag.ErrHelp after printing the usage for
// -h.
func parseArgs(args []string, usage io.Writer) (Config, error) {
	cfg := DefaultConfig()
	if err := cfgpkg.Load(&cfg, args, nil); err != nil {
		if errors.Is(err, cfgpkg.ErrHelp) {
			fmt.Fprintln(usage, "usage: score -model DIR [-input FILE.jsonl] [-output OUT.jsonl] [-config FILE.yaml] [key=value | -key value]...")
			cfgpkg.Help(usage, &cfg)
			return cfg, flag.ErrHelp
		}
		return cfg, fmt.Errorf("score: %w", err)
	}
	if cfg.Tokenizer == "" {
		cfg.Tokenizer = cfg.Model
	}
	return cfg, nil
}

func main() {
	cfg, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := runOn(cfg.Device, os.Stderr, cfg.Model, cfg.Tokenizer, cfg.Input, cfg.Output, cfg.BatchTokens, cfg.SkipBad); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run scores on the CPU without printing a plan.
func run(modelDir, tokDir, input, output string, batchTokens int, skipBad bool) error {
	return runOn(devsel.Config{Device: "cpu"}, io.Discard, modelDir, tokDir, input, output, batchTokens, skipBad)
}

// runOn scores on the device d names, its plan and device line going to
// log.
func runOn(d devsel.Config, log io.Writer, modelDir, tokDir, input, output string, batchTokens int, skipBad bool) error {
	dev, stop, err := openDevice(d, modelDir, batchTokens, log)
	if stop || err != nil {
		return err
	}
	// After the plan: a dry run needs config.json alone.
	if err := weights.CheckFinite(modelDir); err != nil {
		return err
	}
	m, err := model.LoadWith(modelDir, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "auto"})
	if err != nil {
		return err
	}
	in, out := io.Reader(os.Stdin), io.Writer(os.Stdout)
	if input != "-" {
		f, err := os.Open(input)
		if err != nil {
			return fmt.Errorf("score: %w", err)
		}
		defer f.Close()
		in = f
	}
	if output != "-" {
		f, err := os.Create(output)
		if err != nil {
			return fmt.Errorf("score: %w", err)
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	var encode func(string) ([]int32, error)
	s := &scorer{m: m, enc: enc, limit: batchTokens}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	name := input
	for line := 1; sc.Scan(); line++ {
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		ids, err := parseLine(raw, func(text string) ([]int32, error) {
			if encode == nil {
				if encode, err = loadEncoder(tokDir); err != nil {
					return nil, err
				}
			}
			return encode(text)
		}, m.Config.VocabSize)
		if err != nil {
			err = fmt.Errorf("score: %s:%d: %w", name, line, err)
			if !skipBad {
				return err
			}
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		if err := s.add(line, ids); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("score: reading %s: %w", name, err)
	}
	return s.flush()
}

// parseLine decodes one input line into token ids.
func parseLine(raw []byte, encode func(string) ([]int32, error), vocab int) ([]int32, error) {
	var l inputLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	ids := l.Tokens
	switch {
	case l.Tokens != nil && l.Text != nil:
		return nil, errors.New(`both "tokens" and "text" given`)
	case l.Text != nil:
		var err error
		if ids, err = encode(*l.Text); err != nil {
			return nil, err
		}
	case l.Tokens == nil:
		return nil, errors.New(`neither "tokens" nor "text" given`)
	}
	if len(ids) == 0 {
		return nil, errors.New("no tokens: scoring needs at least one")
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", id, i, vocab)
		}
	}
	return ids, nil
}

// scorer packs lines into batches and writes their results in input order.
type scorer struct {
	m     *model.Model
	enc   *json.Encoder
	limit int
	lines []int
	seqs  [][]int32
	n     int
}

func (s *scorer) add(line int, ids []int32) error {
	if s.n > 0 && s.n+len(ids) > s.limit {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.lines, s.seqs, s.n = append(s.lines, line), append(s.seqs, ids), s.n+len(ids)
	return nil
}

func (s *scorer) flush() error {
	if len(s.seqs) == 0 {
		return nil
	}
	b := model.Batch{Seqs: []int32{0}}
	for _, q := range s.seqs {
		b.Tokens = append(b.Tokens, q...)
		b.Seqs = append(b.Seqs, int32(len(b.Tokens)))
	}
	out, err := s.m.Forward(b, false)
	if err != nil {
		return err
	}
	for i, q := range s.seqs {
		lo, hi := int(b.Seqs[i]), int(b.Seqs[i+1])-1 // the last token has no next token
		o := outputLine{Line: s.lines[i], Tokens: q, LogProb: out.LogProb[lo:hi], Entropy: out.Entropy[lo:hi], NextEntropy: out.Entropy[hi]}
		for _, v := range o.LogProb {
			o.SumLogProb += float64(v)
		}
		if err := s.enc.Encode(o); err != nil {
			return fmt.Errorf("score: writing output: %w", err)
		}
	}
	s.lines, s.seqs, s.n = s.lines[:0], s.seqs[:0], 0
	return nil
}
