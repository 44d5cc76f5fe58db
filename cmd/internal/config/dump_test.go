package config

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// unusualConfig changes every key away from its default, with strings
// that YAML would read as something else unless quoted.
func unusualConfig() trainConfig {
	c := defaultTrainConfig()
	c.Seed = math.MinInt64
	c.Model = modelConfig{Path: "/models/Qwen2.5 3B: \"instruct\" #1\nline two\n", Dtype: "fp32", EnableGradientCheckpointing: true}
	c.Data = dataConfig{
		TrainFiles:        []string{"a,b.parquet", "null", " lead", "true", "", "1e-6", "'q'", "ünï", "multi\nline", "\n", "\n\n", " \n", "\t", "a\r\nb", "\x01"},
		ValFiles:          []string{"- dash", "[x]", "{y}", "~"},
		TrainBatchSize:    -1,
		MaxPromptLength:   math.MaxInt,
		MaxResponseLength: 0,
	}
	c.Actor = actorConfig{
		LR: 1.0000000000000002, PPOMiniBatchSize: 1, PPOEpochs: 3, ClipRatio: math.Inf(1),
		UseKLLoss: true, KLLossCoef: 5e-324, KLLossType: "\n\n",
		Optim: optimConfig{Betas: []float64{math.Inf(-1), 0.1, 1e300}, WeightDecay: -0.0, WarmupSteps: 7},
	}
	c.Rollout = rolloutConfig{N: 16, Temperature: 0.1, TopP: math.SmallestNonzeroFloat32, MaxTurns: 0,
		ToolTimeout: 1500 * time.Microsecond, StopTokens: []int{151645, -1}, Seed: math.MaxUint64}
	c.Algorithm = algorithmConfig{AdvEstimator: "on", Gamma: 0.1 + 0.2, Lam: 1}
	c.Trainer = trainerConfig{TotalTrainingSteps: 1, SaveFreq: -1, ProjectName: "",
		ExperimentName: "yes", Logger: []string{"console"}, DefaultLocalDir: "\n", MaxCheckpoints: 255, Resume: true}
	c.Critic = &criticConfig{LR: 2e-5, CliprangeValue: 0.5}
	return c
}

func TestDumpRoundTrip(t *testing.T) {
	for name, cfg := range map[string]trainConfig{
		"defaults": defaultTrainConfig(),
		"unusual":  unusualConfig(),
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Dump(&b, &cfg); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, "dump.yaml", b.String())
			// Into the defaults and into a zero struct: the dump alone
			// decides every value.
			for _, start := range []trainConfig{defaultTrainConfig(), {}} {
				got := start
				cfg.internal = 0 // not a key: not dumped
				if err := Load(&got, []string{"-config", path}, nil); err != nil {
					// Validate may refuse the unusual values; load without it.
					var l loader
					l.root = reflect.TypeOf(got)
					l.loadFile(path, reflect.ValueOf(&got).Elem())
					if len(l.errs) > 0 {
						t.Fatalf("reload: %v", errors.Join(l.errs...))
					}
				}
				if !reflect.DeepEqual(got, cfg) {
					t.Errorf("reloaded\n%+v\nwant\n%+v\ndump:\n%s", got, cfg, b.String())
				}
			}
		})
	}
}

// yaml.v3's own decoder, given the dump, must build the same struct: the
// dump is plain YAML, not a private dialect.
func TestDumpReadsWithYAMLv3(t *testing.T) {
	cfg := unusualConfig()
	var b bytes.Buffer
	if err := Dump(&b, cfg); err != nil {
		t.Fatal(err)
	}
	var got trainConfig
	dec := yaml.NewDecoder(&b)
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cfg) {
		t.Errorf("yaml.v3 read\n%+v\nwant\n%+v", got, cfg)
	}
}

func TestDumpText(t *testing.T) {
	type section struct {
		Rate  float64       `yaml:"rate"`
		Names []string      `yaml:"names"`
		Wait  time.Duration `yaml:"wait"`
	}
	type small struct {
		Name    string   `yaml:"name"`
		Count   uint16   `yaml:"count"`
		On      bool     `yaml:"on"`
		Sec     section  `yaml:"sec"`
		Opt     *section `yaml:"opt"`
		Empty   struct{} `yaml:"empty"`
		Numbers []int    `yaml:"numbers"`
	}
	v := small{Name: "true", Count: 3, On: true,
		Sec: section{Rate: 2, Names: []string{"a b", "c,d"}, Wait: 90 * time.Second}}
	var b strings.Builder
	if err := Dump(&b, v); err != nil {
		t.Fatal(err)
	}
	want := `name: "true"
count: 3
on: true
sec:
  rate: 2.0
  names: [a b, 'c,d']
  wait: 1m30s
opt: null
empty: {}
numbers: []
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestDumpSpecialFloats(t *testing.T) {
	var b bytes.Buffer
	if err := Dump(&b, &kinds{T: "bf16", F64: math.NaN(), F32: float32(math.Inf(-1)), LF: []float64{math.Inf(1)}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"f64: .nan\n", "f32: -.inf\n", "lf: [.inf]\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, b.String())
		}
	}
	var k kinds
	if err := Load(&k, []string{"-config", writeFile(t, "k.yaml", b.String())}, nil); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(k.F64) || !math.IsInf(float64(k.F32), -1) || !math.IsInf(k.LF[0], 1) {
		t.Errorf("reloaded %v %v %v", k.F64, k.F32, k.LF)
	}
}

type badText struct{ s string }

func (b *badText) UnmarshalText(t []byte) error { b.s = string(t); return nil }
func (b badText) MarshalText() ([]byte, error) {
	return nil, errors.New("cannot write " + b.s)
}

func TestDumpMarshalError(t *testing.T) {
	type withBad struct {
		Sec struct {
			List []badText `yaml:"list"`
		} `yaml:"sec"`
	}
	var v withBad
	v.Sec.List = []badText{{"x"}}
	err := Dump(new(bytes.Buffer), &v)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "sec.list[0]" || ce.Msg != "cannot write x" {
		t.Errorf("got %v", err)
	}
}

// level marshals through a pointer receiver, which a struct passed to Dump
// by value cannot offer without a copy.
type level int

func (l *level) MarshalText() ([]byte, error) { return []byte(strings.Repeat("*", int(*l))), nil }
func (l *level) UnmarshalText(b []byte) error {
	if strings.Trim(string(b), "*") != "" {
		return errors.New("want stars")
	}
	*l = level(len(b))
	return nil
}

func TestDumpPointerTextByValue(t *testing.T) {
	type withLevel struct {
		Level  level   `yaml:"level" help:"stars"`
		Levels []level `yaml:"levels"`
	}
	v := withLevel{Level: 3, Levels: []level{1, 2}}
	var b strings.Builder
	if err := Dump(&b, v); err != nil {
		t.Fatal(err)
	}
	if want := "level: '***'\nlevels: ['*', '**']\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	var back withLevel
	if err := Load(&back, []string{"-config", writeFile(t, "l.yaml", b.String()), "levels=['****']"}, nil); err != nil {
		t.Fatal(err)
	}
	if back.Level != 3 || !reflect.DeepEqual(back.Levels, []level{4}) {
		t.Errorf("reloaded %+v", back)
	}
	var h strings.Builder
	Help(&h, v)
	rows, _ := parseHelp(t, h.String())
	if rows["level"] != (helpLine{"level", "'***'", "stars"}) || rows["levels"] != (helpLine{"[]level", "['*', '**']", ""}) {
		t.Errorf("help:\n%s", h.String())
	}
}
