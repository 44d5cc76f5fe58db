// Command serve answers the OpenAI Chat Completions API from a model folder
// r1go loads, on loopback by default:
//
//	go run ./cmd/serve -model runs/r1go/synthetic-grpo/global_step_60/actor
//	go run ./cmd/serve -model DIR -addr 127.0.0.1:8000 serve.max_concurrent=64
//	go run ./cmd/serve -model DIR device=cuda
//	go run ./cmd/serve -model DIR device=cuda device_memory=24GiB dry_run=true
//
// Any OpenAI client then works against base_url http://127.0.0.1:8000/v1:
// POST /v1/chat/completions (tools, streaming, logprobs; vLLM's
// chat_template_kwargs per request and reasoning_content in assistant
// messages) and GET /v1/models. Concurrent requests share one
// continuous-batching engine. The memory plan (the model, the KV cache of
// slots × max_context, a decode step) is printed on stderr before the
// weights load, and the server does not start when it does not fit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/r1go/r1go/cmd/internal/config"
	"github.com/r1go/r1go/internal/devsel"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/plan"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/serve"
)

// Config is the server's configuration.
type Config struct {
	Serve      serve.Config `yaml:"serve"`
	Slots      int          `yaml:"slots" help:"requests decoded together (KV cache slots)"`
	MaxContext int          `yaml:"max_context" help:"tokens per request, prompt and completion"`
	// PrefillTokens bounds one decode step's tokens, and with them its
	// activations: the plan otherwise counts every slot prefilling a prompt
	// as long as max_context at once.
	PrefillTokens int `yaml:"prefill_tokens" help:"most tokens one decode step feeds; longer prompts are fed in pieces (0: no limit; at least slots)"`
	// Device is the section every command shares: device, device_memory,
	// dry_run.
	Device devsel.Config `yaml:",inline"`
}

func defaultConfig() Config {
	return Config{Serve: serve.DefaultConfig(), Slots: 16, MaxContext: 2048, Device: devsel.Default()}
}

// Validate checks the sizes and the device section.
func (c *Config) Validate() error {
	if c.Slots < 1 || c.MaxContext < 2 {
		return fmt.Errorf("slots %d must be ≥ 1 and max_context %d ≥ 2", c.Slots, c.MaxContext)
	}
	if c.PrefillTokens != 0 && c.PrefillTokens < c.Slots {
		return fmt.Errorf("prefill_tokens %d is below slots %d: a step decodes a token for every slot and must still feed some prompt (0: no limit)", c.PrefillTokens, c.Slots)
	}
	return c.Device.Validate()
}

func main() {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {}
	modelDir := fs.String("model", "", "Hugging Face model folder to serve (required)")
	addr := fs.String("addr", "127.0.0.1:8000", "listen address; loopback unless you mean to expose it")
	switch err := config.Load(&cfg, os.Args[1:], fs); {
	case errors.Is(err, config.ErrHelp):
		fmt.Println("usage: serve -model DIR [-addr HOST:PORT] [-config FILE.yaml] [key=value ...]\n\nKeys, with their defaults:")
		config.Help(os.Stdout, &cfg)
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *modelDir == "" {
		fmt.Fprintln(os.Stderr, "serve: -model is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, *modelDir, *addr, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done; the address line goes to out.
func run(ctx context.Context, cfg Config, dir, addr string, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// A request's prompt may fill its whole context, and each slot is a
	// group of one.
	s := plan.Settings{RolloutSlots: cfg.Slots, MaxContext: cfg.MaxContext, MaxPromptTokens: cfg.MaxContext, GroupSize: 1, PrefillTokens: cfg.PrefillTokens,
		Keys: map[string]string{"slots": "slots", "micro_batch": "", "recompute": ""}}
	dev, stop, err := cfg.Device.Open(dir, s, os.Stderr)
	if stop || err != nil {
		return err
	}
	m, err := model.LoadWith(dir, dev, model.LMHeadOutput, model.LoadOptions{Frozen: true, DType: "auto"})
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return err
	}
	if cfg.Serve.ModelName == serve.DefaultConfig().ModelName {
		cfg.Serve.ModelName = filepath.Base(filepath.Clean(dir))
	}
	eng := rl.NewEngine(rl.NewModelPolicy(m, cfg.Slots, cfg.MaxContext), cfg.PrefillTokens)
	defer eng.Close()
	srv, err := serve.New(cfg.Serve, eng, tok)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(addr); !isLoopback(host) {
		fmt.Fprintf(os.Stderr, "serve: listening on %s, which is not loopback: anyone who can reach it can use the model\n", addr)
	}
	fmt.Fprintf(out, "serving %s (%d parameters) as %q on http://%s/v1\n", dir, m.NumParams(), cfg.Serve.ModelName, ln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
