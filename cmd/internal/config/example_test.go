package config_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/r1go/r1go/cmd/internal/config"
)

type RolloutConfig struct {
	N           int           `yaml:"n" help:"samples per prompt"`
	Temperature float64       `yaml:"temperature" help:"sampling temperature"`
	ToolTimeout time.Duration `yaml:"tool_timeout" help:"longest wait for one tool call"`
}

type TrainerConfig struct {
	TotalTrainingSteps int      `yaml:"total_training_steps" help:"RL steps to run"`
	Logger             []string `yaml:"logger" help:"console, jsonl, tensorboard"`
}

func (t *TrainerConfig) Validate() error {
	if t.TotalTrainingSteps < 1 {
		return fmt.Errorf("total_training_steps %d must be at least 1", t.TotalTrainingSteps)
	}
	return nil
}

type Config struct {
	Rollout RolloutConfig `yaml:"rollout" help:"multi-turn sampling"`
	Trainer TrainerConfig `yaml:"trainer"`
}

func DefaultConfig() Config {
	return Config{
		Rollout: RolloutConfig{N: 5, Temperature: 1, ToolTimeout: 30 * time.Second},
		Trainer: TrainerConfig{TotalTrainingSteps: 200, Logger: []string{"console"}},
	}
}

// A command's main: defaults, then arguments; usage errors exit 2.
func Example() {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	device := fs.String("device", "auto", "cpu, cuda or auto")
	args := []string{"rollout.n=8", "-device", "cpu", "trainer.logger=[console,jsonl]", "--rollout.tool_timeout=1m"}
	switch err := config.Load(&cfg, args, fs); {
	case errors.Is(err, config.ErrHelp):
		fs.PrintDefaults()
		config.Help(os.Stdout, &cfg)
		return // exit 0
	case err != nil:
		fmt.Println(err)
		return // exit 2
	}
	fmt.Println("device:", *device)
	config.Dump(os.Stdout, &cfg)
	// Output:
	// device: cpu
	// rollout:
	//   n: 8
	//   temperature: 1.0
	//   tool_timeout: 1m0s
	// trainer:
	//   total_training_steps: 200
	//   logger: [console, jsonl]
}

func ExampleLoad_errors() {
	cfg := DefaultConfig()
	err := config.Load(&cfg, []string{"rollout.n=eight", "rollout.temprature=0.7", "trainer.total_training_steps=0"}, nil)
	fmt.Println(err)
	// Validate runs once everything parses.
	err = config.Load(&cfg, []string{"trainer.total_training_steps=0"}, nil)
	fmt.Println(err)
	// Output:
	// config: rollout.n: "eight" is not an int
	// config: rollout.temprature: unknown key; did you mean rollout.temperature?
	// config: trainer: total_training_steps 0 must be at least 1
}

func ExampleHelp() {
	config.Help(os.Stdout, DefaultConfig())
	// Output:
	// Config keys and defaults. Set them in a YAML file (-config FILE) or with
	// key=value arguments: an argument wins over the file, the file over the
	// default, a later file over an earlier one. Lists take YAML flow syntax.
	// Example: rollout.n=5 trainer.logger=[console]
	//
	// rollout:  multi-turn sampling
	//   rollout.n                     int       5          samples per prompt
	//   rollout.temperature           float     1.0        sampling temperature
	//   rollout.tool_timeout          duration  30s        longest wait for one tool call
	//
	// trainer:
	//   trainer.total_training_steps  int       200        RL steps to run
	//   trainer.logger                []string  [console]  console, jsonl, tensorboard
}
