package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/rl"
	"github.com/r1go/r1go/rl/serve"
)

// startExternal, for rollout.mode=external, serves the OpenAI-compatible
// API from the live policy on rollout.external_addr and makes tr train on
// the episodes agents run through it (serve.External). The engine decodes
// into the rollout's KV cache: in this mode the built-in rollout never
// runs. stop ends the episodes (claims are answered 410) and the server.
func startExternal(cfg *Config, s *agent.Setup, tr *rl.Trainer, out io.Writer) (stop func(), err error) {
	if cfg.RL.Rollout.Mode != "external" {
		return func() {}, nil
	}
	eng := rl.NewEngine(tr.Rollout.Policy, tr.Rollout.Cfg.PrefillTokens)
	ext := serve.NewExternal(tr.Rollout.Cfg, s.Tok, s.Env, eng, s.Stop)
	ext.Log = func(line string) { fmt.Fprintln(out, line) }
	sc := serve.DefaultConfig()
	sc.MaxTokens = max(sc.MaxTokens, cfg.RL.Rollout.MaxTurnTokens)
	srv, err := serve.New(sc, eng, s.Tok)
	if err != nil {
		return nil, err
	}
	srv.Episodes = ext
	ln, err := net.Listen("tcp", cfg.RL.Rollout.ExternalAddr)
	if err != nil {
		return nil, fmt.Errorf("rollout.external_addr: %w", err)
	}
	fmt.Fprintf(out, "external rollouts: agents call http://%s/v1, claim episodes at /v1/episodes/claim, send the episode id in the %s header\n",
		ln.Addr(), serve.EpisodeHeader)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	tr.Source = ext
	return func() {
		ext.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		// The engine stays paused where the last batch left it: the
		// process is ending, and closing it could wait on a plain request
		// the pause holds.
	}, nil
}
