package data

import (
	"fmt"
	"strings"
)

// Settings are the data.* keys that shape loading, as a command's config
// section holds them: inline it (`yaml:",inline"`) into the data section
// and call LoadOptions once, before any work, so a bad value stops the
// run before anything is read.
type Settings struct {
	DataSource   string   `yaml:"data_source" help:"data_source of files that carry none (FlashRAG JSONL, HotpotQA/2Wiki/MuSiQue JSON, parquet without the column); empty: from the folder or file name"`
	DataSources  []string `yaml:"data_sources" help:"per-file data_source as FILE=SOURCE (path or base name), e.g. [popqa_test.jsonl=popqa]"`
	PromptJSON   bool     `yaml:"prompt_json" help:"parse a parquet prompt stored as a string holding a JSON list of {role, content} messages (else such a prompt is an error)"`
	AnswerColumn string   `yaml:"answer_column" help:"parquet column to take gold answers from when reward_model.ground_truth is missing or null: golden_answers, answers or answer; empty: such rows are bad"`
	OnBadRecord  string   `yaml:"on_bad_record" help:"error: a bad record stops the load; skip: bad records are skipped, counted and printed"`
	// MaxSkipFraction is LoadOptions.MaxSkipFraction.
	MaxSkipFraction float64 `yaml:"max_skip_fraction" help:"skip mode: the largest share of a file's records that may be bad before the load fails (a file with no good record always fails)"`
}

// DefaultSettings are the defaults of the data.* loading keys.
func DefaultSettings() Settings { return Settings{MaxSkipFraction: DefaultMaxSkipFraction} }

// LoadOptions checks the settings and returns the loader's options.
func (s Settings) LoadOptions() (LoadOptions, error) {
	var o LoadOptions
	var err error
	if o.SkipMalformed, err = ParseOnBadRecord(s.OnBadRecord); err != nil {
		return o, err
	}
	if s.DataSource != "" && knownSources[s.DataSource] == "" {
		return o, fmt.Errorf("data: data.data_source: %w %q (known: %s)", ErrUnknownSource, s.DataSource, sourceList())
	}
	o.DataSource = s.DataSource
	for _, kv := range s.DataSources {
		file, src, ok := strings.Cut(kv, "=")
		file, src = strings.TrimSpace(file), strings.TrimSpace(src)
		if !ok || file == "" || src == "" {
			return o, fmt.Errorf("data: data.data_sources: %q is not FILE=SOURCE", kv)
		}
		if knownSources[src] == "" {
			return o, fmt.Errorf("data: data.data_sources: %s: %w %q (known: %s)", file, ErrUnknownSource, src, sourceList())
		}
		if o.DataSources == nil {
			o.DataSources = map[string]string{}
		}
		o.DataSources[file] = src
	}
	switch s.AnswerColumn {
	case "", "golden_answers", "answers", "answer":
	default:
		return o, fmt.Errorf("data: data.answer_column %q: want golden_answers, answers or answer", s.AnswerColumn)
	}
	if f := s.MaxSkipFraction; !(f > 0 && f <= 1) {
		return o, fmt.Errorf("data: data.max_skip_fraction %v: want a share in (0, 1] (data.on_bad_record=error allows no bad record)", f)
	}
	o.PromptJSON, o.AnswerColumn, o.MaxSkipFraction = s.PromptJSON, s.AnswerColumn, s.MaxSkipFraction
	return o, nil
}
