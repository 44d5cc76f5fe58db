package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The config of a small RL trainer, with verl's section and key names: the
// shape the real train command has, used by every test in the package.

type dtype string

// dtype is a text type: it checks its own spelling on load.
func (d *dtype) UnmarshalText(b []byte) error {
	switch s := string(b); s {
	case "bf16", "fp32", "fp16":
		*d = dtype(s)
		return nil
	}
	return errors.New("want bf16, fp16 or fp32")
}

func (d dtype) MarshalText() ([]byte, error) { return []byte(d), nil }

type modelConfig struct {
	Path                        string `yaml:"path" help:"Hugging Face model folder"`
	Dtype                       dtype  `yaml:"dtype" help:"compute dtype"`
	EnableGradientCheckpointing bool   `yaml:"enable_gradient_checkpointing" help:"recompute activations in backward"`
}

type dataConfig struct {
	TrainFiles        []string `yaml:"train_files" help:"training parquet files"`
	ValFiles          []string `yaml:"val_files" help:"validation parquet files"`
	TrainBatchSize    int      `yaml:"train_batch_size" help:"prompts per RL step"`
	MaxPromptLength   int      `yaml:"max_prompt_length" help:"prompt tokens kept"`
	MaxResponseLength int      `yaml:"max_response_length" help:"response tokens over all turns"`
	Shuffle           bool     `yaml:"shuffle" help:"shuffle the training set every epoch"`
}

type optimConfig struct {
	Betas       []float64 `yaml:"betas" help:"AdamW beta1, beta2"`
	WeightDecay float64   `yaml:"weight_decay" help:"decoupled weight decay"`
	WarmupSteps int       `yaml:"lr_warmup_steps" help:"linear warmup steps"`
}

type actorConfig struct {
	LR               float64     `yaml:"lr" help:"actor learning rate"`
	PPOMiniBatchSize int         `yaml:"ppo_mini_batch_size" help:"prompts per PPO minibatch"`
	PPOEpochs        int         `yaml:"ppo_epochs" help:"passes over each rollout batch"`
	ClipRatio        float64     `yaml:"clip_ratio" help:"PPO clip epsilon"`
	UseKLLoss        bool        `yaml:"use_kl_loss" help:"add a KL loss against the reference"`
	KLLossCoef       float64     `yaml:"kl_loss_coef" help:"weight of the KL loss"`
	KLLossType       string      `yaml:"kl_loss_type" help:"kl, abs, mse or low_var_kl"`
	Optim            optimConfig `yaml:"optim" help:"optimizer"`
}

func (a *actorConfig) Validate() error {
	if a.LR <= 0 {
		return fmt.Errorf("lr %g must be positive", a.LR)
	}
	if a.PPOMiniBatchSize < 1 {
		return fmt.Errorf("ppo_mini_batch_size %d must be at least 1", a.PPOMiniBatchSize)
	}
	return nil
}

type rolloutConfig struct {
	N           int           `yaml:"n" help:"samples per prompt"`
	Temperature float64       `yaml:"temperature" help:"sampling temperature"`
	TopP        float32       `yaml:"top_p" help:"nucleus sampling mass"`
	MaxTurns    int           `yaml:"max_turns" help:"assistant turns per trajectory"`
	ToolTimeout time.Duration `yaml:"tool_timeout" help:"longest wait for one tool call"`
	StopTokens  []int         `yaml:"stop_token_ids" help:"extra stop token ids"`
	Seed        uint64        `yaml:"seed" help:"sampling seed"`
}

type algorithmConfig struct {
	AdvEstimator string  `yaml:"adv_estimator" help:"grpo, gae, rloo or reinforce_plus_plus"`
	Gamma        float64 `yaml:"gamma" help:"discount"`
	Lam          float64 `yaml:"lam" help:"GAE lambda"`
}

func (a algorithmConfig) Validate() error { // value receiver on purpose: both kinds are found
	if !slices.Contains([]string{"grpo", "gae", "rloo", "reinforce_plus_plus"}, a.AdvEstimator) {
		return fmt.Errorf("adv_estimator %q is not grpo, gae, rloo or reinforce_plus_plus", a.AdvEstimator)
	}
	return nil
}

type trainerConfig struct {
	TotalTrainingSteps int      `yaml:"total_training_steps" help:"RL steps to run"`
	TotalEpochs        int      `yaml:"total_epochs" help:"passes over the training set"`
	SaveFreq           int      `yaml:"save_freq" help:"save every N steps (-1: never)"`
	TestFreq           int      `yaml:"test_freq" help:"validate every N steps"`
	ProjectName        string   `yaml:"project_name" help:"project name for logs and checkpoints"`
	ExperimentName     string   `yaml:"experiment_name" help:"run name"`
	Logger             []string `yaml:"logger" help:"console, jsonl, tensorboard"`
	DefaultLocalDir    string   `yaml:"default_local_dir" help:"checkpoint folder"`
	MaxCheckpoints     uint8    `yaml:"max_actor_ckpt_to_keep" help:"checkpoints kept (0: all)"`
	Resume             bool     `yaml:"resume" help:"resume from the latest checkpoint"`
}

type criticConfig struct {
	LR             float64 `yaml:"lr" help:"critic learning rate"`
	CliprangeValue float64 `yaml:"cliprange_value" help:"value clip"`
}

func (c *criticConfig) Validate() error {
	if c.LR <= 0 {
		return errors.New("lr must be positive")
	}
	return nil
}

type trainConfig struct {
	Seed      int64           `yaml:"seed" help:"random seed"`
	Model     modelConfig     `yaml:"model" help:"policy model"`
	Data      dataConfig      `yaml:"data" help:"datasets"`
	Actor     actorConfig     `yaml:"actor" help:"policy optimisation"`
	Rollout   rolloutConfig   `yaml:"rollout" help:"multi-turn sampling"`
	Algorithm algorithmConfig `yaml:"algorithm"`
	Trainer   trainerConfig   `yaml:"trainer"`
	Critic    *criticConfig   `yaml:"critic" help:"value model, for GAE"`
	internal  int             // unexported: not a key
}

func (c *trainConfig) Validate() error {
	if c.Algorithm.AdvEstimator == "gae" && c.Critic == nil {
		return errors.New("algorithm.adv_estimator=gae needs a critic section")
	}
	if c.Data.TrainBatchSize%c.Actor.PPOMiniBatchSize != 0 {
		return fmt.Errorf("data.train_batch_size %d is not a multiple of actor.ppo_mini_batch_size %d",
			c.Data.TrainBatchSize, c.Actor.PPOMiniBatchSize)
	}
	return nil
}

func defaultTrainConfig() trainConfig {
	return trainConfig{
		Seed:  1,
		Model: modelConfig{Path: "", Dtype: "bf16"},
		Data: dataConfig{
			TrainFiles:        []string{"data/train.parquet"},
			TrainBatchSize:    256,
			MaxPromptLength:   4096,
			MaxResponseLength: 4096,
			Shuffle:           true,
		},
		Actor: actorConfig{
			LR:               1e-6,
			PPOMiniBatchSize: 64,
			PPOEpochs:        1,
			ClipRatio:        0.2,
			KLLossCoef:       0.001,
			KLLossType:       "low_var_kl",
			Optim:            optimConfig{Betas: []float64{0.9, 0.999}, WeightDecay: 0.01},
		},
		Rollout: rolloutConfig{
			N:           5,
			Temperature: 1.0,
			TopP:        1,
			MaxTurns:    4,
			ToolTimeout: 30 * time.Second,
		},
		Algorithm: algorithmConfig{AdvEstimator: "grpo", Gamma: 1.0, Lam: 1.0},
		Trainer: trainerConfig{
			TotalTrainingSteps: 200,
			TotalEpochs:        1,
			SaveFreq:           50,
			TestFreq:           10,
			ProjectName:        "r1go",
			ExperimentName:     "grpo-qwen2.5",
			Logger:             []string{"console", "jsonl"},
			DefaultLocalDir:    "checkpoints",
			MaxCheckpoints:     3,
		},
	}
}

// writeFile writes a config file into a fresh temporary folder and returns
// its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// load runs Load on a fresh default config with no command flags.
func load(t *testing.T, args ...string) (trainConfig, error) {
	t.Helper()
	cfg := defaultTrainConfig()
	err := Load(&cfg, args, nil)
	return cfg, err
}

// usageErrors returns the *Error values inside err, failing if err holds
// anything else.
func usageErrors(t *testing.T, err error) []*Error {
	t.Helper()
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case *Error:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		default:
			t.Fatalf("error %v (%T) is not a *config.Error", e, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

func wantErrorContaining(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}
