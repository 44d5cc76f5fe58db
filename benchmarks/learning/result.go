package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/r1go/r1go/rl/metrics"
)

// Score is one source's line of cmd/train's eval.json and cmd/eval's
// -output (agent.Results), read from the JSON so that the table depends on
// the files' format, not on the commands' packages.
type Score struct {
	N         int
	EM        float64
	F1        float64
	CoverEM   float64
	Turns     float64
	ToolCalls float64
}

// Results maps a source ("all", "synthetic/2-hop", ...) to its scores.
type Results map[string]Score

// hops are the synthetic world's question lengths, each a column.
var hops = []string{"synthetic/2-hop", "synthetic/3-hop", "synthetic/4-hop"}

// WarmResult is a warm start: the policy folder, its held-out results with
// the tool and as Naive RAG, and its validation EM.
type WarmResult struct {
	Policy      string
	Agent       Results
	NaiveRAG    Results
	ValEM       float64 // the learning curves' step 0
	Wall        float64 // seconds: SFT and the evaluations
	SFTWall     float64 // seconds of SFT steps, from its log
	SFTCommand  string  `json:",omitempty"`
	EvalCommand string
	Machine     string `json:",omitempty"` // where it was made: machine()
	Commit      string `json:",omitempty"` // the code it was made with: checkout()
}

// RunResult is one RL run of a row at one seed.
type RunResult struct {
	Steps    int             // RL steps in metrics.jsonl
	Curve    []metrics.Point // validation EM by step, step 0 the warm start
	Curve4   []metrics.Point // the same on 4-hop questions (no step 0)
	PeakStep int             // the earliest step of the highest validation EM
	PeakVal  float64
	Final    Results // held-out, after the last step
	Best     Results // held-out, the checkpoint of PeakStep
	Wall     float64 // seconds: training, its evaluations and the best checkpoint's
	Command  string
	Machine  string `json:",omitempty"` // where it was made: machine()
	Commit   string `json:",omitempty"` // the code it was made with: checkout()
}

const (
	valAll  = "val-core/all/em"
	valHop4 = "val-core/synthetic/4-hop/em"
)

// readRun reads a finished cmd/train run folder: metrics.jsonl for the
// validation curve and the step count, eval.json for the held-out results.
// warmVal is the warm start's validation EM, the curve's step 0.
func readRun(run string, warmVal float64) (*RunResult, error) {
	recs, err := metrics.ReadJSONL(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		return nil, err
	}
	res := &RunResult{Curve: []metrics.Point{{Step: 0, Value: warmVal}}}
	steps := map[int]bool{}
	for _, r := range recs {
		steps[r.Step] = true
		if v, ok := r.Data[valAll]; ok {
			res.Curve = append(res.Curve, metrics.Point{Step: r.Step, Value: v})
		}
		if v, ok := r.Data[valHop4]; ok {
			res.Curve4 = append(res.Curve4, metrics.Point{Step: r.Step, Value: v})
		}
	}
	res.Steps = len(steps)
	sort.SliceStable(res.Curve, func(i, j int) bool { return res.Curve[i].Step < res.Curve[j].Step })
	res.PeakStep, res.PeakVal = 0, warmVal
	for _, p := range res.Curve {
		if p.Value > res.PeakVal {
			res.PeakStep, res.PeakVal = p.Step, p.Value
		}
	}
	if err := readJSON(filepath.Join(run, "eval.json"), &res.Final); err != nil {
		return nil, err
	}
	if _, ok := res.Final["all"]; !ok {
		return nil, fmt.Errorf("%s: no \"all\" results", filepath.Join(run, "eval.json"))
	}
	return res, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path through a temporary file, so that a result
// file is either whole or absent.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
