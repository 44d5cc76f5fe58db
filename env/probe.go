package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Prober is a remote retriever that can be asked, before any work,
// whether it answers: one attempt, no retries. A dead retriever found
// this way costs nothing; found by the run, it costs tool errors the
// policy learns from, or nothing at all when the policy seldom searches.
type Prober interface {
	// Probe makes one request that a working retriever answers and says
	// what came back otherwise.
	Probe(ctx context.Context) error
	// ProbeURL is the URL the probe goes to.
	ProbeURL() string
}

// probeQuery is the query a Search-R1 server is probed with; any answer
// of the right shape, hits or none, shows it works.
const probeQuery = "retriever probe"

// Probe sends one query to /retrieve and checks the answer's shape.
func (s *SearchR1Client) Probe(ctx context.Context) error {
	body, _ := json.Marshal(map[string]any{"queries": []string{probeQuery}, "topk": 1, "return_scores": true})
	return s.c.attempt(ctx, http.MethodPost, s.c.endpoint, body, func(b []byte) error {
		_, err := decodeRetrieve(b, 1)
		return err
	})
}

// ProbeURL implements Prober.
func (s *SearchR1Client) ProbeURL() string { return s.c.endpoint }

// Probe asks Agent-R1's server GET /health, which answers 200 once the
// index is loaded.
func (a *AgentR1Client) Probe(ctx context.Context) error {
	return a.c.attempt(ctx, http.MethodGet, a.ProbeURL(), nil, nil)
}

// ProbeURL is /health beside the /search endpoint.
func (a *AgentR1Client) ProbeURL() string {
	u, err := url.Parse(a.c.endpoint)
	if err != nil {
		return a.c.endpoint
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/search") + "/health"
	u.RawQuery = ""
	return u.String()
}

// ProbeError is a retriever that did not answer its probe.
type ProbeError struct {
	URL      string
	Wait     time.Duration // env.retriever_wait; 0: one probe
	Attempts int
	Err      error // what came back the last time
}

func (e *ProbeError) Error() string {
	what := describeProbe(e.Err)
	if e.Wait <= 0 {
		return fmt.Sprintf("env: retriever %s does not answer: %s (check env.retriever_url, or set env.retriever_wait, e.g. 30s, to wait for a retriever that is starting)", e.URL, what)
	}
	var r retryable
	if !errors.As(e.Err, &r) {
		return fmt.Sprintf("env: retriever %s does not answer: %s (waiting under env.retriever_wait %v would not change that answer)", e.URL, what, e.Wait)
	}
	return fmt.Sprintf("env: retriever %s did not answer within env.retriever_wait %v (%d probes): %s", e.URL, e.Wait, e.Attempts, what)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// describeProbe is what came back, without the URL the error repeats.
func describeProbe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

// WaitReady probes p once before any work. With wait > 0
// (env.retriever_wait) a retriever that is starting gets that long: the
// probes repeat with back-off while the answer is one that time can change
// (refused, timed out, 429, 5xx), and log, when not nil, hears once that
// the run waits. An answer waiting cannot change (404, a body of the wrong
// shape) fails at once.
func WaitReady(ctx context.Context, p Prober, wait time.Duration, log func(string)) error {
	start := time.Now()
	pause := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := p.Probe(ctx)
		if err == nil {
			if attempt > 1 && log != nil {
				log(fmt.Sprintf("retriever: %s answered after %v", p.ProbeURL(), time.Since(start).Round(time.Millisecond)))
			}
			return nil
		}
		fail := &ProbeError{URL: p.ProbeURL(), Wait: wait, Attempts: attempt, Err: err}
		var r retryable
		left := wait - time.Since(start)
		if wait <= 0 || !errors.As(err, &r) || left <= 0 || ctx.Err() != nil {
			return fail
		}
		if attempt == 1 && log != nil {
			log(fmt.Sprintf("retriever: %s does not answer yet (%s); waiting up to env.retriever_wait %v", p.ProbeURL(), describeProbe(err), wait))
		}
		select {
		case <-time.After(min(pause, left)):
		case <-ctx.Done():
			return fail
		}
		pause = min(2*pause, 5*time.Second)
	}
}
