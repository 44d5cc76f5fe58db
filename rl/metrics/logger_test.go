package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAllSinks runs a small training log through every sink Open builds
// and reads each destination back.
func TestOpenAllSinks(t *testing.T) {
	dir, tbDir := t.TempDir(), t.TempDir()
	t.Setenv("TENSORBOARD_DIR", tbDir) // verl's override of tensorboard_log/{project}/{experiment}
	var console, bar bytes.Buffer
	log, err := Open(Config{
		Sinks:        []string{SinkConsole, SinkJSONL, SinkTensorBoard, SinkProgress},
		Console:      &console,
		Dir:          dir,
		Project:      "proj",
		Experiment:   "exp",
		TotalSteps:   3,
		Progress:     &bar,
		ProgressKeys: []string{"critic/score/mean"},
		// TensorBoardDir left empty: $TENSORBOARD_DIR decides.
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := []map[string]float64{
		{"critic/score/mean": 0.25, "timing_s/step": 2},
		{"critic/score/mean": 0.5, "timing_s/step": 1.5},
		{"critic/score/mean": 0.75, "timing_s/step": 1.25},
	}
	for i, v := range steps {
		if err := log.Log(i+1, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := log.Log(4, steps[0]); err == nil {
		t.Error("Log after Close succeeded")
	}

	wantConsole := "step:1 - critic/score/mean:0.25 - timing_s/step:2\n" +
		"step:2 - critic/score/mean:0.5 - timing_s/step:1.5\n" +
		"step:3 - critic/score/mean:0.75 - timing_s/step:1.25\n"
	if console.String() != wantConsole {
		t.Errorf("console:\n%s\nwant:\n%s", console.String(), wantConsole)
	}

	recs, err := ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || len(recs) != 3 || recs[2].Step != 3 || recs[2].Data["critic/score/mean"] != 0.75 {
		t.Errorf("jsonl: %+v, %v", recs, err)
	}

	var tbSink *TensorBoard
	for _, s := range log.Sinks() {
		if tb, ok := s.(*TensorBoard); ok {
			tbSink = tb
		}
	}
	if tbSink == nil {
		t.Fatal("no tensorboard sink")
	}
	if !strings.HasPrefix(tbSink.Path(), filepath.Join(tbDir, "events.out.tfevents.")) {
		t.Errorf("event file at %s, want it in %s", tbSink.Path(), tbDir)
	}
	scalars, err := ReadEvents(tbSink.Path())
	if err != nil || len(scalars) != 6 {
		t.Fatalf("tensorboard: %d scalars, %v", len(scalars), err)
	}
	series := SeriesFromScalars(scalars)["critic/score/mean"]
	if len(series) != 3 || series[1] != (Point{2, 0.5}) {
		t.Errorf("tensorboard series %+v", series)
	}

	out := bar.String()
	for _, want := range []string{"(3/3", "100%", "score/mean 0.75"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q: %q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Error("progress bar line not ended on Close")
	}
}

// failSink fails every Log and Close.
type failSink struct{ logged int }

func (f *failSink) Name() string { return "fail" }
func (f *failSink) Log(step int, values map[string]float64) error {
	f.logged++
	return fmt.Errorf("metrics: fail sink /x/y: step %d: device gone", step)
}
func (f *failSink) Close() error { return errors.New("fail sink /x/y: close failed") }

// TestLoggerFailingSink: a failing sink's error names it and the step, and
// the sinks after it still receive the step.
func TestLoggerFailingSink(t *testing.T) {
	bad := &failSink{}
	hist := NewHistory()
	log := New(bad, hist)
	err := log.Log(7, map[string]float64{"a": 1})
	if err == nil || !strings.Contains(err.Error(), "metrics: fail sink /x/y: step 7: device gone") {
		t.Errorf("error %v", err)
	}
	if got := hist.Series()["a"]; len(got) != 1 || got[0] != (Point{7, 1}) {
		t.Errorf("history after failing sink: %+v", got)
	}
	if err := log.Close(); err == nil || !strings.Contains(err.Error(), "close failed") {
		t.Errorf("Close: %v", err)
	}
}

func TestLoggerBadInput(t *testing.T) {
	log := Null()
	if err := log.Log(1, map[string]float64{"a": 1}); err != nil {
		t.Errorf("null logger: %v", err)
	}
	if err := log.Log(-1, nil); err == nil || !strings.Contains(err.Error(), "negative step") {
		t.Errorf("negative step: %v", err)
	}
	if err := log.Log(2, map[string]float64{"": 1}); err == nil || !strings.Contains(err.Error(), "empty metric name") {
		t.Errorf("empty name: %v", err)
	}
	if err := log.Close(); err != nil {
		t.Error(err)
	}
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Sinks: []string{"wandb"}}, `unknown sink "wandb"`},
		{Config{Sinks: []string{"console", "console"}}, "listed twice"},
		{Config{Sinks: []string{"jsonl"}}, "needs Config.JSONLPath or Config.Dir"},
		{Config{Sinks: []string{"progress"}}, "TotalSteps > 0"},
		{Config{Sinks: []string{"jsonl"}, JSONLPath: "/proc/nope/m.jsonl"}, "jsonl sink /proc/nope/m.jsonl"},
		{Config{Sinks: []string{"tensorboard"}, TensorBoardDir: "/proc/nope"}, "tensorboard sink /proc/nope"},
	}
	for _, c := range cases {
		if _, err := Open(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v, want error containing %q", c.cfg.Sinks, err, c.want)
		}
	}
}
