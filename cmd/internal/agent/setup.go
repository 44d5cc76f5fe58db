// Package agent assembles what the train and eval commands share: the
// datasets (the synthetic world by default), the tokenizer, the policy
// model, the tool environment, and greedy evaluation. Errors name the file
// or key that was wrong; nothing is assembled half-way.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// ModelConfig chooses the policy: a Hugging Face folder, or a tiny Qwen2
// made on the spot with a tokenizer trained on the synthetic corpus.
type ModelConfig struct {
	Path           string `yaml:"path" help:"Hugging Face model folder; empty: a tiny Qwen2 made on the spot"`
	Hidden         int    `yaml:"hidden_size" help:"tiny model: hidden size"`
	Layers         int    `yaml:"num_hidden_layers" help:"tiny model: layers"`
	Heads          int    `yaml:"num_attention_heads" help:"tiny model: query heads"`
	KVHeads        int    `yaml:"num_key_value_heads" help:"tiny model: key-value heads"`
	Intermediate   int    `yaml:"intermediate_size" help:"tiny model: MLP width"`
	TokenizerVocab int    `yaml:"tokenizer_vocab" help:"tiny model: BPE vocabulary trained on the synthetic corpus"`
	Seed           uint64 `yaml:"seed" help:"tiny model: weight initialisation seed"`
	MaxContext     int    `yaml:"max_context" help:"tokens per trajectory (KV cache length)"`
	// Frozen loads model.Path without gradients, keeping a bf16 folder's
	// bf16 where the device stores it: what evaluation needs, a quarter of
	// a trainable copy's memory.
	Frozen bool `yaml:"-"`
}

// DataConfig chooses the datasets. data.Settings (data_source,
// data_sources, prompt_json, answer_column, on_bad_record,
// max_skip_fraction) is inlined: its
// keys sit in the data section and shape how the files are read.
type DataConfig struct {
	data.Settings  `yaml:",inline"`
	TrainFiles     []string  `yaml:"train_files" help:"training sets (JSON, JSONL, parquet); empty: the synthetic world"`
	ValFiles       []string  `yaml:"val_files" help:"validation sets; empty: the synthetic world"`
	Corpus         string    `yaml:"corpus" help:"retrieval corpus JSONL (wiki-18 or KILT); empty: the synthetic world's"`
	TrainBatchSize int       `yaml:"train_batch_size" help:"prompts per RL step"`
	ValSize        int       `yaml:"val_size" help:"validation questions evaluated (0: all)"`
	Seed           uint64    `yaml:"seed" help:"data order seed"`
	SynthSeed      uint64    `yaml:"synth_seed" help:"synthetic world seed"`
	SynthTrain     int       `yaml:"synth_train" help:"synthetic training questions"`
	SynthEval      int       `yaml:"synth_eval" help:"synthetic validation and test questions, each"`
	SynthHops      []float64 `yaml:"synth_hop_weights" help:"shares of 2-, 3- and 4-hop synthetic questions"`
	// TemplateKwargs are verl's data.apply_chat_template_kwargs.
	TemplateKwargs tokenizer.TemplateKwargs `yaml:"apply_chat_template_kwargs" help:"chat template keyword arguments, a JSON object (Qwen3: {\"enable_thinking\": false})"`
}

// EnvConfig is the env section: the environment's own settings, which are
// env.Config embedded as it is (its keys, defaults and checks live there),
// and the tools the environment is built with.
type EnvConfig struct {
	env.Config `yaml:",inline"`
	Tools      []string `yaml:"tools" help:"tools by name: search, lookup (ReAct's lookup[term] in the last search's passages), or a registered tool"`
	TopK       int      `yaml:"topk" help:"passages per search"`
	Format     string   `yaml:"format" help:"search-r1 or agent-r1 passage formatting"`
	Retriever  string   `yaml:"retriever_url" help:"Search-R1 /retrieve URL; empty: the local BM25 index"`
	IndexPath  string   `yaml:"index" help:"BM25 index file (built from the corpus when missing or stale)"`
	// SlowFraction and SlowDelay give the retriever a long latency tail
	// (env.SlowRetriever), to measure training with slow tools.
	SlowFraction float64       `yaml:"slow_fraction" help:"share of search queries delayed by env.slow_delay (a fixed share, chosen by the query's text)"`
	SlowDelay    time.Duration `yaml:"slow_delay" help:"added latency of the delayed search queries"`
}

// DefaultDataConfig is the synthetic world of the embedded default run;
// train and eval share it so that eval scores the world train learned.
func DefaultDataConfig() DataConfig {
	return DataConfig{Settings: data.DefaultSettings(), TrainBatchSize: 8, ValSize: 50, Seed: 1, SynthSeed: 1,
		SynthTrain: 3000, SynthEval: 200, SynthHops: []float64{0.4, 0.35, 0.25}}
}

// DefaultEnvConfig is the search environment of the embedded default run:
// Agent-R1's tool turns, one Search-R1-formatted passage per search. The
// synthetic world ranks every gold query's evidence first, and one passage
// halves the observations the tiny policy reads: with gold warm starts of
// 300 steps, held-out EM 0.145 with one passage against 0.030 with two.
// The reward is exact match, train's default, so that train and eval score
// one model alike (with agent-r1's format term a wrong answer scores -1,
// under em 0), and because after the warm start the format is already
// right (0.98) and Agent-R1's format term then only adds noise to GRPO's
// groups. Measured from the same SFT checkpoint, 30 steps: em at lr 2e-4
// 0.080 -> 0.095; agent-r1 at 5e-4 0.080 -> 0.070.
func DefaultEnvConfig() EnvConfig {
	c := EnvConfig{Config: env.DefaultConfig(), Tools: []string{"search"}, TopK: 1, Format: "search-r1"}
	// The tiny policy's departures from Agent-R1's environment: short tool
	// responses, a plain instruction, no <think> pre-fill, exact match.
	c.MaxResponseChars, c.Prefill, c.Reward = 512, "", "em"
	c.Instruction = "Search for every fact you need, then answer in <answer></answer>."
	return c
}

// Validate reports negative sizes and a hop mix that is not three shares.
func (c *DataConfig) Validate() error {
	if c.TrainBatchSize < 1 {
		return fmt.Errorf("train_batch_size %d must be ≥ 1", c.TrainBatchSize)
	}
	if c.ValSize < 0 {
		return fmt.Errorf("val_size %d must be ≥ 0 (0: all)", c.ValSize)
	}
	if c.SynthTrain < 0 || c.SynthEval < 0 {
		return fmt.Errorf("synth_train %d and synth_eval %d must be ≥ 0", c.SynthTrain, c.SynthEval)
	}
	if _, err := c.LoadOptions(); err != nil {
		return err
	}
	if len(c.SynthHops) != 3 {
		return fmt.Errorf("synth_hop_weights has %d entries, want 3 (2-, 3-, 4-hop)", len(c.SynthHops))
	}
	for _, w := range c.SynthHops {
		if !(w >= 0) {
			return fmt.Errorf("synth_hop_weights %v: each share must be ≥ 0", c.SynthHops)
		}
	}
	return nil
}

// Validate checks the environment's settings (env.Config.Validate) and the
// tools: registered names, a positive topk, a known passage format.
func (c *EnvConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if err := env.CheckToolNames(c.Tools); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	if c.TopK < 1 {
		return fmt.Errorf("topk %d must be ≥ 1", c.TopK)
	}
	switch env.SearchFormat(c.Format) {
	case env.FormatAgentR1, env.FormatSearchR1, env.FormatVerl:
	default:
		return fmt.Errorf("format %q is not search-r1, agent-r1 or verl", c.Format)
	}
	if !(c.SlowFraction >= 0 && c.SlowFraction <= 1) || c.SlowDelay < 0 {
		return fmt.Errorf("slow_fraction %v must be in [0, 1] and slow_delay %v ≥ 0", c.SlowFraction, c.SlowDelay)
	}
	return nil
}

// ProbeRetriever checks, before any work, that env.retriever_url answers:
// one probe, or probes with back-off for env.retriever_wait
// (env.WaitReady); log hears that the command waits. The local BM25 index
// needs no probe. Commands call it before their run folder, device or
// model, so a dead retriever costs nothing.
func (c *EnvConfig) ProbeRetriever(ctx context.Context, log func(string)) error {
	if c.Retriever == "" {
		return nil
	}
	cl, err := env.NewSearchR1Client(c.RetrieverClientConfig(c.Retriever))
	if err != nil {
		return err
	}
	return env.WaitReady(ctx, cl, c.RetrieverWait, log)
}

// Setup is everything a run needs, assembled.
type Setup struct {
	World            *synth.World // nil with user datasets
	Train, Val, Test []data.Sample
	Tok              *tokenizer.Tokenizer
	Policy           *model.Model
	Env              env.Environment // *env.Env, or *env.SearchR1Env for env.style=search-r1
	Stop             []int32         // </tool_call>, <|im_end|>, <|endoftext|>
	EndOfTurn        int32           // <|im_end|>
	ToolCallEnd      int32           // </tool_call>
	TokenizerDir     string          // folder the tokenizer files were read from or written to
	Retriever        env.Retriever
	EnvConfig        EnvConfig
	// DataReports are the loader's reports of the user's files (nil for
	// the synthetic world): data.SkipSummary and data.SkippedCount read
	// them in skip mode (data.on_bad_record=skip).
	DataReports []data.Report
	index       *env.Index
}

// ToolStats is the environment's tool-call counter (env.ToolStats): the
// trainer takes it once per step.
func (s *Setup) ToolStats() *env.ToolStats {
	if e, ok := s.Env.(interface{ ToolStats() *env.ToolStats }); ok {
		return e.ToolStats()
	}
	return &env.ToolStats{} // an environment that counts nothing
}

// Close releases the index file.
func (s *Setup) Close() error {
	if s.index != nil {
		return s.index.Close()
	}
	return nil
}

// Build assembles a run in workDir (corpus, index and tokenizer files of
// the synthetic world go there). It does not probe env.retriever_url:
// callers do that first (EnvConfig.ProbeRetriever).
func Build(ctx context.Context, mc ModelConfig, dc DataConfig, ec EnvConfig, dev model.Device, workDir string) (*Setup, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	s := &Setup{}
	corpus := dc.Corpus
	// The synthetic world only when no file is given: eval given only
	// data.val_files evaluates them.
	synthetic := len(dc.TrainFiles) == 0 && len(dc.ValFiles) == 0
	if synthetic {
		cfg := synth.DefaultConfig()
		cfg.Seed, cfg.Train, cfg.Validation, cfg.Test = dc.SynthSeed, dc.SynthTrain, dc.SynthEval, dc.SynthEval
		if len(dc.SynthHops) != 3 {
			return nil, fmt.Errorf("agent: data.synth_hop_weights has %d entries, want 3 (2-, 3-, 4-hop)", len(dc.SynthHops))
		}
		copy(cfg.HopWeights[:], dc.SynthHops)
		w, err := synth.New(cfg)
		if err != nil {
			return nil, err
		}
		s.World, s.Train, s.Val, s.Test = w, w.Train, w.Validation, w.Test
		if corpus == "" {
			corpus = filepath.Join(workDir, "corpus.jsonl")
			if err := writeFile(corpus, w.WriteCorpus); err != nil {
				return nil, err
			}
		}
	} else {
		opt, err := dc.LoadOptions()
		if err != nil {
			return nil, err
		}
		var rep []data.Report
		if s.Train, rep, err = loadAll(dc.TrainFiles, opt); err != nil {
			return nil, err
		}
		s.DataReports = append(s.DataReports, rep...)
		if s.Val, rep, err = loadAll(dc.ValFiles, opt); err != nil {
			return nil, err
		}
		s.DataReports = append(s.DataReports, rep...)
		// Prompts written for another tool protocol than env.style would
		// end every episode without a call: refused here, for train and
		// eval alike, naming the files and the setting.
		if err := env.CheckPromptStyle(ec.Style, fmt.Sprintf("data.train_files %v", dc.TrainFiles), s.Train); err != nil {
			return nil, err
		}
		if err := env.CheckPromptStyle(ec.Style, fmt.Sprintf("data.val_files %v", dc.ValFiles), s.Val); err != nil {
			return nil, err
		}
	}
	if dc.ValSize > 0 && len(s.Val) > dc.ValSize {
		s.Val = s.Val[:dc.ValSize]
	}
	if len(s.Train) == 0 && len(s.Val) == 0 {
		return nil, errors.New("agent: no samples: data.train_files and data.val_files hold none")
	}

	var err error
	if s.Env, s.Retriever, s.index, err = buildEnv(ec, corpus, workDir); err != nil {
		return nil, err
	}
	s.EnvConfig = ec
	if mc.Path != "" {
		opt := model.LoadOptions{Frozen: mc.Frozen, DType: "auto"}
		if s.Policy, err = model.LoadWith(mc.Path, dev, model.LMHeadOutput, opt); err != nil {
			return nil, err
		}
		if s.Tok, err = tokenizer.Load(mc.Path); err != nil {
			return nil, err
		}
		s.TokenizerDir = mc.Path
	} else {
		if s.World == nil {
			return nil, errors.New("agent: model.path is empty; a tiny model is made only for the synthetic world")
		}
		s.TokenizerDir = filepath.Join(workDir, "tokenizer")
		if s.Tok, err = trainTokenizer(ctx, s, mc.TokenizerVocab, s.TokenizerDir); err != nil {
			return nil, err
		}
		if s.Policy, err = tinyModel(mc, s.Tok, dev); err != nil {
			return nil, err
		}
	}
	s.Tok.SetTemplateKwargs(dc.TemplateKwargs)
	if s.Stop, err = tokenIDs(s.Tok, "</tool_call>", "<|im_end|>", "<|endoftext|>"); err != nil {
		return nil, err
	}
	s.ToolCallEnd, s.EndOfTurn = s.Stop[0], s.Stop[1]
	if s.Policy.Config.VocabSize < s.Tok.VocabSize() {
		return nil, fmt.Errorf("agent: the tokenizer has %d tokens, the model only %d", s.Tok.VocabSize(), s.Policy.Config.VocabSize)
	}
	return s, nil
}

// tokenIDs looks up special tokens by name.
func tokenIDs(tok *tokenizer.Tokenizer, names ...string) ([]int32, error) {
	ids := make([]int32, len(names))
	for i, name := range names {
		id, ok := tok.TokenID(name)
		if !ok {
			return nil, fmt.Errorf("agent: the tokenizer has no %s token", name)
		}
		ids[i] = int32(id)
	}
	return ids, nil
}

func loadAll(files []string, opt data.LoadOptions) ([]data.Sample, []data.Report, error) {
	if len(files) == 0 {
		return nil, nil, nil
	}
	return data.LoadFiles(files, opt)
}

func writeFile(path string, write func(w io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("agent: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("agent: writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// buildEnv makes the search tool (local BM25 or an HTTP retriever) and the
// environment: an *env.Env with the tools, or with env.style=search-r1 an
// *env.SearchR1Env.
func buildEnv(ec EnvConfig, corpus, workDir string) (env.Environment, env.Retriever, *env.Index, error) {
	var r env.Retriever
	var ix *env.Index
	if ec.Retriever != "" {
		// env.retriever_timeout and env.retriever_retries bound what a
		// hanging or failing retriever costs per call.
		c, err := env.NewSearchR1Client(ec.RetrieverClientConfig(ec.Retriever))
		if err != nil {
			return nil, nil, nil, err
		}
		r = c
	} else {
		if corpus == "" {
			return nil, nil, nil, errors.New("agent: data.corpus is empty and env.retriever_url is not set: the search tool has nothing to search")
		}
		idx := ec.IndexPath
		if idx == "" {
			idx = filepath.Join(workDir, strings.TrimSuffix(filepath.Base(corpus), ".jsonl")+".bm25")
		}
		var err error
		if ix, _, _, err = env.OpenOrBuildIndex(corpus, idx, data.CorpusOptions{}, env.BuildOptions{}, env.DefaultBM25); err != nil {
			return nil, nil, nil, err
		}
		r = ix
	}
	if ec.SlowFraction > 0 && ec.SlowDelay > 0 {
		s, err := env.NewSlowRetriever(r, ec.SlowFraction, ec.SlowDelay)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("agent: env.slow_fraction, env.slow_delay: %w", err)
		}
		r = s
	}
	if ec.Style == env.StyleSearchR1 {
		// Search-R1's protocol: <search> tags, no tool schema; env.tools
		// does not apply, the retriever is searched directly.
		e, err := env.NewSearchR1(r, ec.Config, ec.TopK)
		if err != nil {
			return nil, nil, nil, err
		}
		return e, r, ix, nil
	}
	tools, err := env.NewTools(ec.Tools, env.ToolDeps{Retriever: r, Search: env.SearchToolConfig{TopK: ec.TopK, Format: env.SearchFormat(ec.Format)}})
	if err != nil {
		return nil, nil, nil, err
	}
	e, err := env.New(ec.Config, tools...)
	if err != nil {
		return nil, nil, nil, err
	}
	return e, r, ix, nil
}
