package synth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/r1go/r1go/data"
)

// SFTOptions picks the training samples whose gold trajectories the
// supervised warm start sees. The rest of the train split stays for RL.
type SFTOptions struct {
	// MaxHops keeps only questions of at most this many hops; 0 keeps all.
	MaxHops int
	// Fraction of the eligible samples to keep, in [0, 1], drawn by Seed.
	Fraction float64
	// EarlyAnswer, in [0, 1), makes the demonstrations those of a hasty
	// teacher: before each search but the first, the teacher stops with
	// this probability and answers with the entity it found last (see
	// Hasty). Each kept sample's demonstration is drawn once, by Seed.
	EarlyAnswer float64
	Seed        uint64
}

// DefaultSFTOptions warm-starts on the gold trajectories of every 2-hop
// training question: the tool-call format and the search-then-answer habit.
// (r1go's embedded default run uses every question with EarlyAnswer 0.6
// instead; see the package documentation.)
func DefaultSFTOptions() SFTOptions { return SFTOptions{MaxHops: 2, Fraction: 1, Seed: 1} }

// SFTSubset returns the samples of train that carry a gold trajectory and
// pass opt, in their original order.
func SFTSubset(train []data.Sample, opt SFTOptions) ([]data.Sample, error) {
	if !(opt.Fraction >= 0 && opt.Fraction <= 1) {
		return nil, fmt.Errorf("synth: SFTOptions.Fraction = %v, want a value in [0, 1]", opt.Fraction)
	}
	if !(opt.EarlyAnswer >= 0 && opt.EarlyAnswer < 1) {
		return nil, fmt.Errorf("synth: SFTOptions.EarlyAnswer = %v, want a value in [0, 1)", opt.EarlyAnswer)
	}
	if opt.MaxHops < 0 {
		return nil, fmt.Errorf("synth: SFTOptions.MaxHops = %d, want 0 (all) or more", opt.MaxHops)
	}
	var eligible []int
	for i, s := range train {
		if s.Gold != nil && (opt.MaxHops == 0 || len(s.Gold.Steps) <= opt.MaxHops) {
			eligible = append(eligible, i)
		}
	}
	keep := int(opt.Fraction*float64(len(eligible)) + 0.5)
	rng := newRNG(opt.Seed, 0x5f7)
	chosen := make([]bool, len(train))
	for _, j := range rng.Perm(len(eligible))[:keep] {
		chosen[eligible[j]] = true
	}
	var out []data.Sample
	hasty := newRNG(opt.Seed, 0xea51)
	for i, s := range train {
		if !chosen[i] {
			continue
		}
		if opt.EarlyAnswer > 0 {
			steps := 1
			for steps < len(s.Gold.Steps) && hasty.Float64() >= opt.EarlyAnswer {
				steps++
			}
			s.Gold = Hasty(s.Gold, steps)
		}
		out = append(out, s)
	}
	return out, nil
}

// Hasty returns the demonstration of a teacher that stops after the first
// steps searches of t and answers with the entity the last of them found,
// in the words the gold trajectory uses for its final turn. It returns t
// itself when steps covers every search (or is out of range).
//
// A hasty answer is wrong on the question it was made for, and the point:
// a policy warm-started on such demonstrations has learned the format, the
// queries and the copying, but answers early as often as its teacher did;
// the outcome reward then teaches it to search to the end of the chain.
func Hasty(t *data.Trajectory, steps int) *data.Trajectory {
	if steps < 1 || steps >= len(t.Steps) {
		return t
	}
	last := t.Steps[steps-1]
	return &data.Trajectory{
		Steps:        t.Steps[:steps:steps],
		FinalThought: answerThought(last.Query, last.Found),
		Answer:       last.Found,
	}
}

// WriteCorpus writes the passages as wiki-18 JSONL, one
// {"id": "0", "contents": "\"Title\"\ntext"} per line, spaced as Python's
// json.dumps spaces it, which Search-R1's retriever and r1go's corpus reader
// both read.
func (w *World) WriteCorpus(out io.Writer) error {
	bw := bufio.NewWriter(out)
	for _, p := range w.Passages {
		id, _ := json.Marshal(p.ID)             // plain ASCII: cannot fail
		contents, _ := json.Marshal(p.Contents) // idem
		fmt.Fprintf(bw, "{\"id\": %s, \"contents\": %s}\n", id, contents)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("synth: writing the corpus: %w", err)
	}
	return nil
}

// CorpusReader serves the corpus through the reader every corpus file goes
// through (wiki-18 JSONL, held in memory), so an index is built from the
// synthetic world exactly as from a file on disk.
func (w *World) CorpusReader() *data.CorpusReader {
	var buf bytes.Buffer
	_ = w.WriteCorpus(&buf) // writing to memory cannot fail
	return data.NewCorpusReader(&buf, "synthetic corpus", data.CorpusOptions{Layout: data.LayoutWiki18})
}

// WriteFlashRAG writes samples in FlashRAG's JSONL layout,
// {"id", "question", "golden_answers", "metadata"}, so other trainers can
// use the synthetic world; id is the sample's id without its data_source
// namespace and metadata holds the sample's Extra.
func WriteFlashRAG(out io.Writer, samples []data.Sample) error {
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, s := range samples {
		rec := struct {
			ID            string            `json:"id"`
			Question      string            `json:"question"`
			GoldenAnswers []string          `json:"golden_answers"`
			Metadata      map[string]string `json:"metadata"`
		}{strings.TrimPrefix(s.ID, s.DataSource+":"), s.Question, s.Answers, s.Extra}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("synth: writing sample %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("synth: writing samples: %w", err)
	}
	return nil
}

// Texts returns the text a tokenizer for the world should be trained on:
// every passage, every question of every split, and the rendered gold turns
// of the train split.
func (w *World) Texts() []string {
	var out []string
	for _, p := range w.Passages {
		out = append(out, p.Contents)
	}
	for _, split := range [][]data.Sample{w.Train, w.Validation, w.Test} {
		for _, s := range split {
			out = append(out, s.Question)
		}
	}
	for _, s := range w.Train {
		out = append(out, s.Gold.Turns()...)
	}
	return out
}

// Export writes the world into dir as the files Python trainers read:
// corpus.jsonl (wiki-18), {train,validation,test}.parquet in layout (the
// style's default prompt, Search-R1 or Agent-R1), and the same splits as
// FlashRAG JSONL ({train,validation,test}.jsonl). So Search-R1 or Agent-R1
// can be run on exactly the data r1go trains on.
func (w *World) Export(dir string, layout data.ParquetLayout) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		return nil
	}
	if err := write("corpus.jsonl", w.WriteCorpus); err != nil {
		return err
	}
	for _, split := range []struct {
		name    string
		samples []data.Sample
	}{{"train", w.Train}, {"validation", w.Validation}, {"test", w.Test}} {
		l := layout
		l.Split = split.name
		if err := write(split.name+".parquet", func(out io.Writer) error { return data.WriteParquet(out, split.samples, l) }); err != nil {
			return err
		}
		if err := write(split.name+".jsonl", func(out io.Writer) error { return WriteFlashRAG(out, split.samples) }); err != nil {
			return err
		}
	}
	return nil
}
