package env

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sort"
	"sync"
)

// FaultKind classifies the outcome of one tool call, so a dead or slow
// retriever shows up in the step metrics instead of only as "Error: ..."
// observations the model reads.
type FaultKind string

const (
	FaultOK         FaultKind = "ok"
	FaultInvalid    FaultKind = "invalid"    // the model's call was malformed: bad JSON, unknown tool, bad arguments, blank query
	FaultTimeout    FaultKind = "timeout"    // a deadline passed (env.retriever_timeout, Config.CallTimeout)
	FaultHTTP       FaultKind = "http"       // the server answered a status other than 200
	FaultParse      FaultKind = "parse"      // a 200 answer that is not JSON, or JSON of the wrong shape
	FaultConnection FaultKind = "connection" // refused, reset, DNS, a body cut off
	FaultOther      FaultKind = "other"      // any other tool error, a panic, a tool reporting failure
)

// FaultKinds are the kinds that count as tool errors, in metric order.
var FaultKinds = []FaultKind{FaultTimeout, FaultHTTP, FaultParse, FaultConnection, FaultOther}

// ClassifyCall says what became of one call, and the URL it went to when
// the error came from an HTTP retriever.
func ClassifyCall(ci CallInfo) (FaultKind, string) {
	switch ci.ErrorKind {
	case ErrJSON, ErrNoName, ErrNoArguments, ErrUnknownTool, ErrInvalidArguments:
		return FaultInvalid, ""
	case ErrNone:
		if ci.Success {
			return FaultOK, ""
		}
		return FaultOther, ""
	case ErrPanic:
		return FaultOther, ""
	}
	kind, u := ClassifyError(ci.Err)
	if ci.ErrorKind == ErrTimeout {
		kind = FaultTimeout
	}
	return kind, u
}

// ClassifyError classifies a tool's error: FaultOK for nil.
func ClassifyError(err error) (FaultKind, string) {
	if err == nil {
		return FaultOK, ""
	}
	var u string
	var ce *ClientError
	if errors.As(err, &ce) {
		u = ce.URL
	}
	var (
		se *StatusError
		re *ResponseError
		ne net.Error
		oe *net.OpError
		ue *url.Error
	)
	switch {
	case errors.Is(err, errEmptyQuery):
		return FaultInvalid, u
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return FaultTimeout, u
	case errors.As(err, &se):
		return FaultHTTP, u
	case errors.As(err, &re):
		return FaultParse, u
	case errors.As(err, &oe), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &ue):
		return FaultConnection, u
	}
	return FaultOther, u
}

// ToolStats counts tool-call outcomes; an Env adds every call of every
// episode, and the trainer takes the counts once per step. Safe for
// concurrent use.
type ToolStats struct {
	mu   sync.Mutex
	snap ToolSnapshot
}

// ToolSnapshot is the counts of one period (a training step).
type ToolSnapshot struct {
	Calls   int // every parsed call, valid or not
	Invalid int // calls the model got wrong (not the tool's fault)
	Errors  int // executed calls that failed, by kind in ByKind
	ByKind  map[FaultKind]int
	// URL is the retriever each error kind last came from ("" for tools
	// that are not HTTP clients).
	URL map[FaultKind]string
}

// Add counts one call.
func (s *ToolStats) Add(ci CallInfo) {
	kind, u := ClassifyCall(ci)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Calls++
	switch kind {
	case FaultOK:
	case FaultInvalid:
		s.snap.Invalid++
	default:
		s.snap.Errors++
		if s.snap.ByKind == nil {
			s.snap.ByKind, s.snap.URL = map[FaultKind]int{}, map[FaultKind]string{}
		}
		s.snap.ByKind[kind]++
		if u != "" {
			s.snap.URL[kind] = u
		}
	}
}

// AddAll counts the calls of one step.
func (s *ToolStats) AddAll(calls []CallInfo) {
	for _, c := range calls {
		s.Add(c)
	}
}

// Snapshot returns the counts so far.
func (s *ToolStats) Snapshot() ToolSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap.clone()
}

// Reset zeroes the counts.
func (s *ToolStats) Reset() {
	s.mu.Lock()
	s.snap = ToolSnapshot{}
	s.mu.Unlock()
}

// Take returns the counts and zeroes them in one step, so no call falls
// between a Snapshot and a Reset.
func (s *ToolStats) Take() ToolSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.snap
	s.snap = ToolSnapshot{}
	return out
}

func (t ToolSnapshot) clone() ToolSnapshot {
	out := t
	out.ByKind, out.URL = nil, nil
	if t.ByKind != nil {
		out.ByKind, out.URL = map[FaultKind]int{}, map[FaultKind]string{}
		for k, v := range t.ByKind {
			out.ByKind[k] = v
		}
		for k, v := range t.URL {
			out.URL[k] = v
		}
	}
	return out
}

// Executed is the calls that reached a tool (Calls - Invalid).
func (t ToolSnapshot) Executed() int { return t.Calls - t.Invalid }

// ErrorRate is Errors over the executed calls; 0 when none ran.
func (t ToolSnapshot) ErrorRate() float64 {
	if t.Executed() == 0 {
		return 0
	}
	return float64(t.Errors) / float64(t.Executed())
}

// WorstKind is the error kind with the most calls (ties: FaultKinds
// order) and its URL; FaultOK when there was no error.
func (t ToolSnapshot) WorstKind() (FaultKind, string) {
	best, n := FaultOK, 0
	for _, k := range FaultKinds {
		if t.ByKind[k] > n {
			best, n = k, t.ByKind[k]
		}
	}
	return best, t.URL[best]
}

// Metrics are the step metrics: tool/calls, tool/invalid, tool/errors and
// tool/errors/<kind> for every kind (0 included, so the JSONL and
// TensorBoard columns never come and go).
func (t ToolSnapshot) Metrics() map[string]float64 {
	m := map[string]float64{
		"tool/calls":   float64(t.Calls),
		"tool/invalid": float64(t.Invalid),
		"tool/errors":  float64(t.Errors),
	}
	for _, k := range FaultKinds {
		m["tool/errors/"+string(k)] = float64(t.ByKind[k])
	}
	return m
}

// MetricNames lists the keys of Metrics, sorted.
func MetricNames() []string {
	names := make([]string, 0, len(FaultKinds)+3)
	for k := range (ToolSnapshot{}).Metrics() {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
