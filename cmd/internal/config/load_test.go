package config

import (
	"errors"
	"flag"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// kinds holds one field of every scalar kind and list the package takes.
type kinds struct {
	S   string        `yaml:"s"`
	B   bool          `yaml:"b"`
	I   int           `yaml:"i"`
	I8  int8          `yaml:"i8"`
	I16 int16         `yaml:"i16"`
	I32 int32         `yaml:"i32"`
	I64 int64         `yaml:"i64"`
	U   uint          `yaml:"u"`
	U8  uint8         `yaml:"u8"`
	U16 uint16        `yaml:"u16"`
	U32 uint32        `yaml:"u32"`
	U64 uint64        `yaml:"u64"`
	F32 float32       `yaml:"f32"`
	F64 float64       `yaml:"f64"`
	D   time.Duration `yaml:"d"`
	T   dtype         `yaml:"t"`
	LS  []string      `yaml:"ls"`
	LI  []int         `yaml:"li"`
	LF  []float64     `yaml:"lf"`
	LD  []time.Duration
	LB  []bool `yaml:"lb"`
}

func TestOverrideEveryType(t *testing.T) {
	tests := []struct {
		arg  string
		want any // the field's value after the override
		get  func(k kinds) any
	}{
		{"s=hello world", "hello world", func(k kinds) any { return k.S }},
		{"s=", "", func(k kinds) any { return k.S }},
		{"s=null", "null", func(k kinds) any { return k.S }}, // strings are verbatim
		{"s=a: b #c", "a: b #c", func(k kinds) any { return k.S }},
		{"s='quoted '' text'", "quoted ' text", func(k kinds) any { return k.S }},
		{`s="tab\tx"`, "tab\tx", func(k kinds) any { return k.S }},
		{"s= spaced ", " spaced ", func(k kinds) any { return k.S }},
		{"s=x=y", "x=y", func(k kinds) any { return k.S }}, // only the first '=' splits
		{"b=true", true, func(k kinds) any { return k.B }},
		{"b=False", false, func(k kinds) any { return k.B }},
		{"b=yes", true, func(k kinds) any { return k.B }},
		{"b=0", false, func(k kinds) any { return k.B }},
		{"i=-42", -42, func(k kinds) any { return k.I }},
		{"i=0x1f", 31, func(k kinds) any { return k.I }},
		{"i=010", 10, func(k kinds) any { return k.I }}, // YAML 1.2: decimal, not octal
		{"i=0o10", 8, func(k kinds) any { return k.I }},
		{"i=1_000_000", 1000000, func(k kinds) any { return k.I }},
		{"i= 7 ", 7, func(k kinds) any { return k.I }},
		{"i8=-128", int8(-128), func(k kinds) any { return k.I8 }},
		{"i16=32767", int16(32767), func(k kinds) any { return k.I16 }},
		{"i32=-2147483648", int32(-2147483648), func(k kinds) any { return k.I32 }},
		{"i64=9223372036854775807", int64(math.MaxInt64), func(k kinds) any { return k.I64 }},
		{"u=3", uint(3), func(k kinds) any { return k.U }},
		{"u8=255", uint8(255), func(k kinds) any { return k.U8 }},
		{"u16=0xffff", uint16(65535), func(k kinds) any { return k.U16 }},
		{"u32=4294967295", uint32(4294967295), func(k kinds) any { return k.U32 }},
		{"u64=18446744073709551615", uint64(math.MaxUint64), func(k kinds) any { return k.U64 }},
		{"f32=0.1", float32(0.1), func(k kinds) any { return k.F32 }},
		{"f64=1e-6", 1e-6, func(k kinds) any { return k.F64 }},
		{"f64=.5", 0.5, func(k kinds) any { return k.F64 }},
		{"f64=3", 3.0, func(k kinds) any { return k.F64 }},
		{"f64=-.inf", math.Inf(-1), func(k kinds) any { return k.F64 }},
		{"f64=+Inf", math.Inf(1), func(k kinds) any { return k.F64 }},
		{"d=1h30m", 90 * time.Minute, func(k kinds) any { return k.D }},
		{"d=250ms", 250 * time.Millisecond, func(k kinds) any { return k.D }},
		{"d=0", time.Duration(0), func(k kinds) any { return k.D }},
		{"t=fp32", dtype("fp32"), func(k kinds) any { return k.T }},
		{"ls=[a, 'b c', \"d,e\"]", []string{"a", "b c", "d,e"}, func(k kinds) any { return k.LS }},
		{"ls=['console','wandb']", []string{"console", "wandb"}, func(k kinds) any { return k.LS }},
		{"ls=single", []string{"single"}, func(k kinds) any { return k.LS }},
		{"ls='a,b'", []string{"a,b"}, func(k kinds) any { return k.LS }},
		{"ls=[]", []string(nil), func(k kinds) any { return k.LS }},
		{"ls=", []string(nil), func(k kinds) any { return k.LS }},
		{"li=[1, -2, 0x10]", []int{1, -2, 16}, func(k kinds) any { return k.LI }},
		{"li=7", []int{7}, func(k kinds) any { return k.LI }},
		{"lf=[0.9, 0.999, 1e-8]", []float64{0.9, 0.999, 1e-8}, func(k kinds) any { return k.LF }},
		{"ld=[1s, 2m]", []time.Duration{time.Second, 2 * time.Minute}, func(k kinds) any { return k.LD }},
		{"lb=[true, no]", []bool{true, false}, func(k kinds) any { return k.LB }},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			k := kinds{S: "default", LS: []string{"x"}, LI: []int{9}}
			if err := Load(&k, []string{tc.arg}, nil); err != nil {
				t.Fatal(err)
			}
			if got := tc.get(k); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestOverrideBadValues(t *testing.T) {
	tests := []struct {
		arg, want string
	}{
		{"f64=abc", `config: f64: "abc" is not a float`},
		{"f64=", "config: f64: no value given; want a float"},
		{"f32=1e39", `config: f32: "1e39" is out of range for float32`},
		{"i=1.5", `config: i: "1.5" is not an int`},
		{"i=1e3", `config: i: "1e3" is not an int`},
		{"i8=128", `config: i8: "128" is out of range for int8`},
		{"u=-1", `config: u: "-1" is not a non-negative int`},
		{"u8=256", `config: u8: "256" is out of range for uint8`},
		{"b=maybe", `config: b: "maybe" is not a bool (true or false)`},
		{"d=30", `config: d: "30" is not a duration (like 90s, 5m or 1h30m)`},
		{"t=int4", `config: t: "int4" is not a dtype: want bf16, fp16 or fp32`},
		{"i=[1,2]", `config: i: "[1,2]" is not an int`},
		{"li=[1,x]", `config: li[1]: "x" is not an int`},
		{"li=[[1]]", "config: li[0]: a list is not an int"},
		{"ls=a.parquet,b.parquet", `config: ls: "a.parquet,b.parquet" is one value; write a list as [a.parquet,b.parquet]`},
		{"ls={a: 1}", "config: ls: a mapping is not a list of string"},
		{"ls=[a", `config: ls: "[a" is not valid YAML`},
		{"noequals", `config: argument "noequals" is not a key=value override or a -flag`},
		{"=1", `config: argument "=1" has no key before '='`},
		{"s.x=1", "config: s.x: unknown key; s is a string, not a section"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			var k kinds
			err := Load(&k, []string{tc.arg}, nil)
			wantErrorContaining(t, err, tc.want)
			if es := usageErrors(t, err); len(es) != 1 {
				t.Errorf("got %d errors, want 1: %v", len(es), err)
			}
		})
	}
}

func TestNestedPaths(t *testing.T) {
	cfg, err := load(t,
		"actor.optim.weight_decay=0.1",
		"actor.optim.betas=[0.8, 0.95]",
		"rollout.tool_timeout=2m",
		"data.train_files=[a.parquet, b.parquet]",
		"trainer.logger=[console]",
		"algorithm={adv_estimator: rloo, gamma: 0.99}",
	)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultTrainConfig()
	want.Actor.Optim.WeightDecay = 0.1
	want.Actor.Optim.Betas = []float64{0.8, 0.95}
	want.Rollout.ToolTimeout = 2 * time.Minute
	want.Data.TrainFiles = []string{"a.parquet", "b.parquet"}
	want.Trainer.Logger = []string{"console"}
	want.Algorithm.AdvEstimator, want.Algorithm.Gamma = "rloo", 0.99 // lam keeps its default
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got\n%+v\nwant\n%+v", cfg, want)
	}
}

func TestOptionalSection(t *testing.T) {
	// Setting a key of an unset optional section creates it with zero values.
	cfg, err := load(t, "critic.lr=1e-5", "algorithm.adv_estimator=gae")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Critic == nil || *cfg.Critic != (criticConfig{LR: 1e-5}) {
		t.Errorf("critic = %+v, want {LR: 1e-5}", cfg.Critic)
	}
	cfg, err = load(t, "critic={lr: 2e-5, cliprange_value: 0.5}", "critic.lr=3e-5")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Critic == nil || *cfg.Critic != (criticConfig{LR: 3e-5, CliprangeValue: 0.5}) {
		t.Errorf("critic = %+v, want {3e-5 0.5}", cfg.Critic)
	}
	cfg, err = load(t, "critic.lr=1e-5", "critic=null")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Critic != nil {
		t.Errorf("critic = %+v after critic=null, want nil", cfg.Critic)
	}
	_, err = load(t, "critic=yes")
	wantErrorContaining(t, err, "config: critic: critic is an optional section, not a value; set its keys (critic.lr=..., critic.cliprange_value=...) or null")
	_, err = load(t, "actor=1")
	wantErrorContaining(t, err, "config: actor: actor is a section, not a value; set its keys (actor.lr=..., actor.ppo_mini_batch_size=...)")
}

func TestUnknownKeySuggestions(t *testing.T) {
	tests := []struct {
		arg, want string
	}{
		{"actor.lrr=1", "config: actor.lrr: unknown key; did you mean actor.lr?"},
		{"actr.lr=1", "config: actr.lr: unknown key; did you mean actor.lr"},
		// verl's long names find the short ones by their last segment.
		{"actor_rollout_ref.rollout.n=8", "did you mean rollout.n?"},
		{"actor_rollout_ref.actor.optim.lr=1e-6", "did you mean actor.lr or critic.lr?"},
		{"data.train_file=x", "did you mean data.train_files"},
		{"trainer.total_training_step=5", "did you mean trainer.total_training_steps"},
		// Nothing close: the section's keys are listed instead.
		{"rollout.zzzzzzzzzzzz=1", "config: rollout.zzzzzzzzzzzz: unknown key; rollout has n, temperature, top_p, max_turns, tool_timeout, stop_token_ids, seed"},
		{"qqqqqqqqqqqqqqqq=1", "unknown key; the top level has seed, model, data, actor, rollout, algorithm, trainer, critic"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			_, err := load(t, tc.arg)
			wantErrorContaining(t, err, tc.want)
		})
	}
}

func TestPrecedence(t *testing.T) {
	base := writeFile(t, "base.yaml", "actor:\n  lr: 2e-6\n  ppo_epochs: 2\nrollout:\n  n: 8\n")
	over := writeFile(t, "over.yaml", "actor:\n  lr: 3e-6\n")

	cfg, err := load(t)
	if err != nil || cfg.Actor.LR != 1e-6 || cfg.Rollout.N != 5 {
		t.Fatalf("defaults: lr %g n %d err %v", cfg.Actor.LR, cfg.Rollout.N, err)
	}
	// The file beats the defaults.
	cfg, err = load(t, "-config", base)
	if err != nil || cfg.Actor.LR != 2e-6 || cfg.Actor.PPOEpochs != 2 || cfg.Rollout.N != 8 {
		t.Fatalf("file: %+v err %v", cfg.Actor, err)
	}
	// An override beats the file, even when written before -config.
	cfg, err = load(t, "actor.lr=5e-6", "--config="+base)
	if err != nil || cfg.Actor.LR != 5e-6 || cfg.Actor.PPOEpochs != 2 {
		t.Fatalf("override before file: %+v err %v", cfg.Actor, err)
	}
	// A later file beats an earlier one, key by key.
	cfg, err = load(t, "--config", base, "-config", over)
	if err != nil || cfg.Actor.LR != 3e-6 || cfg.Actor.PPOEpochs != 2 || cfg.Rollout.N != 8 {
		t.Fatalf("two files: %+v err %v", cfg.Actor, err)
	}
	// Among overrides the later wins; -key value is an override too.
	cfg, err = load(t, "actor.lr=4e-6", "-actor.lr", "6e-6", "--actor.ppo_epochs=3")
	if err != nil || cfg.Actor.LR != 6e-6 || cfg.Actor.PPOEpochs != 3 {
		t.Fatalf("overrides: %+v err %v", cfg.Actor, err)
	}
}

func TestCommandFlags(t *testing.T) {
	base := writeFile(t, "base.yaml", "rollout:\n  n: 8\n")
	run := func(args ...string) (trainConfig, string, bool, error) {
		cfg := defaultTrainConfig()
		fs := flag.NewFlagSet("train", flag.ContinueOnError)
		device := fs.String("device", "auto", "cpu, cuda or auto")
		verbose := fs.Bool("v", false, "verbose")
		// A section's name is free for a command flag.
		fs.StringVar(&cfg.Model.Path, "model", cfg.Model.Path, "model folder (model.path)")
		// A flag bound to a config field: a shortcut for rollout.n.
		fs.IntVar(&cfg.Rollout.N, "samples", cfg.Rollout.N, "samples per prompt")
		err := Load(&cfg, args, fs)
		return cfg, *device, *verbose, err
	}
	cfg, device, verbose, err := run("-device", "cuda", "actor.lr=2e-6", "-v", "rollout.top_p=0.9")
	if err != nil || device != "cuda" || !verbose || cfg.Actor.LR != 2e-6 || cfg.Rollout.TopP != 0.9 {
		t.Fatalf("mixed flags and overrides: device %q verbose %v lr %g top_p %g err %v", device, verbose, cfg.Actor.LR, cfg.Rollout.TopP, err)
	}
	// A bound flag beats the file and obeys command-line order against an override.
	cfg, _, _, err = run("-config", base, "-samples", "3", "-model", "/m")
	if err != nil || cfg.Rollout.N != 3 || cfg.Model.Path != "/m" {
		t.Fatalf("bound flag vs file: n %d path %q err %v", cfg.Rollout.N, cfg.Model.Path, err)
	}
	cfg, _, _, err = run("-samples=3", "rollout.n=4")
	if err != nil || cfg.Rollout.N != 4 {
		t.Fatalf("flag then override: n %d err %v", cfg.Rollout.N, err)
	}
	cfg, _, _, err = run("rollout.n=4", "--samples=3")
	if err != nil || cfg.Rollout.N != 3 {
		t.Fatalf("override then flag: n %d err %v", cfg.Rollout.N, err)
	}
	// Usage errors, all reported at once.
	_, _, _, err = run("-devcie", "cpu", "-samples", "many", "-v=maybe", "-device")
	wantErrorContaining(t, err,
		"config: unknown flag -devcie; did you mean -device?",
		`config: invalid value "many" for flag -samples`,
		`config: invalid value "maybe" for flag -v`,
		"config: flag needs an argument: -device")
	if n := len(usageErrors(t, err)); n != 4 {
		t.Errorf("got %d errors, want 4: %v", n, err)
	}
	// After "--" everything is an override, even what looks like a flag.
	_, _, _, err = run("--", "-v")
	wantErrorContaining(t, err, `config: argument "-v" is not a key=value override`)
	cfg, _, _, err = run("-v", "--", "rollout.n=2")
	if err != nil || cfg.Rollout.N != 2 {
		t.Fatalf("after --: n %d err %v", cfg.Rollout.N, err)
	}
}

func TestFlagSyntax(t *testing.T) {
	cfg, err := load(t, "-trainer.resume", "--model.enable_gradient_checkpointing=false", "-rollout.n", "-3")
	if err != nil || !cfg.Trainer.Resume || cfg.Model.EnableGradientCheckpointing || cfg.Rollout.N != -3 {
		t.Fatalf("key flags: %+v %+v n %d err %v", cfg.Trainer, cfg.Model, cfg.Rollout.N, err)
	}
	for _, tc := range []struct{ arg, want string }{
		{"---x", "config: bad flag syntax: ---x"},
		{"-=x", "config: bad flag syntax: -=x"},
		{"-actor.lrr=1", "config: unknown flag -actor.lrr; did you mean -actor.lr?"},
		{"-actor", "config: unknown flag -actor"},
		{"-config", "config: flag needs an argument: -config"},
		{"-config=", "config: flag -config needs a file name"},
	} {
		_, err := load(t, tc.arg)
		wantErrorContaining(t, err, tc.want)
	}
}

func TestHelpRequested(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"-help"}, {"--h"},
		// Help wins over bad arguments anywhere, as a user asking for help
		// after a typo expects.
		{"actor.lr=abc", "-nosuch", "-h"},
	} {
		cfg := defaultTrainConfig()
		err := Load(&cfg, args, nil)
		if !errors.Is(err, ErrHelp) || !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err %v, want ErrHelp", args, err)
		}
		if !reflect.DeepEqual(cfg, defaultTrainConfig()) {
			t.Errorf("%q: help changed the config", args)
		}
	}
	// After "--", -h is just an argument.
	_, err := load(t, "--", "-h")
	if errors.Is(err, ErrHelp) || err == nil {
		t.Errorf("-h after --: err %v, want a usage error", err)
	}
}

func TestValidateHook(t *testing.T) {
	tests := []struct {
		args []string
		want []string // every error, in order
	}{
		{[]string{"actor.lr=0"}, []string{"config: actor: lr 0 must be positive"}},
		{[]string{"algorithm.adv_estimator=ppo"}, []string{`config: algorithm: adv_estimator "ppo" is not grpo, gae, rloo or reinforce_plus_plus`}},
		// Sibling sections are all reported, in declaration order.
		{[]string{"algorithm.adv_estimator=ppo", "actor.lr=-1"}, []string{
			"config: actor: lr -1 must be positive",
			`config: algorithm: adv_estimator "ppo" is not grpo, gae, rloo or reinforce_plus_plus`,
		}},
		// The root runs only once its sections pass, and is unprefixed.
		{[]string{"actor.lr=-1", "algorithm.adv_estimator=gae"}, []string{"config: actor: lr -1 must be positive"}},
		{[]string{"algorithm.adv_estimator=gae"}, []string{"config: algorithm.adv_estimator=gae needs a critic section"}},
		// A failing section keeps the root (which divides by
		// ppo_mini_batch_size) from running.
		{[]string{"actor.ppo_mini_batch_size=0"}, []string{"config: actor: ppo_mini_batch_size 0 must be at least 1"}},
		// An optional section is validated once set.
		{[]string{"critic.cliprange_value=0.2", "algorithm.adv_estimator=gae"}, []string{"config: critic: lr must be positive"}},
		{[]string{"data.train_batch_size=100"}, []string{"config: data.train_batch_size 100 is not a multiple of actor.ppo_mini_batch_size 64"}},
		// Nothing is validated while values fail to parse (the zero
		// mini-batch would divide by zero in the root's Validate).
		{[]string{"actor.ppo_mini_batch_size=0", "actor.lr=x"}, []string{`config: actor.lr: "x" is not a float`}},
	}
	for _, tc := range tests {
		_, err := load(t, tc.args...)
		es := usageErrors(t, err)
		var got []string
		for _, e := range es {
			got = append(got, e.Error())
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\ngot  %q\nwant %q", tc.args, got, tc.want)
		}
	}
	// The Validate error stays reachable for errors.As/Is.
	_, err := load(t, "actor.lr=0")
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "actor" || ce.Err == nil || !strings.Contains(ce.Err.Error(), "lr 0") {
		t.Errorf("Error fields %+v", ce)
	}
}

func TestManyErrorsReportedTogether(t *testing.T) {
	_, err := load(t, "actor.lr=abc", "rollout.n=1.5", "trainer.nosuch=1", "-config", "/nonexistent/r1go.yaml")
	es := usageErrors(t, err)
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = e.Error()
	}
	want := []string{
		"config: /nonexistent/r1go.yaml: no such file or directory",
		`config: actor.lr: "abc" is not a float`,
		`config: rollout.n: "1.5" is not an int`,
		"config: trainer.nosuch: unknown key; trainer has total_training_steps, total_epochs, save_freq, test_freq, project_name, experiment_name, logger, default_local_dir, max_actor_ckpt_to_keep, resume",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

type inlineBase struct {
	Name string `yaml:"name"`
}

type withInline struct {
	inlineBase `yaml:",inline"`
	Size       int `yaml:"size"`
	Skipped    int `yaml:"-"`
	NoTag      int
}

func TestInlineSkipAndDefaultNames(t *testing.T) {
	var w withInline
	if err := Load(&w, []string{"name=x", "size=2", "notag=3"}, nil); err != nil {
		t.Fatal(err)
	}
	if w.Name != "x" || w.Size != 2 || w.NoTag != 3 {
		t.Errorf("got %+v", w)
	}
	err := Load(&w, []string{"skipped=1"}, nil)
	wantErrorContaining(t, err, "skipped: unknown key")
}

type (
	withMap struct{ M map[string]int }
	withDup struct {
		A, B int `yaml:"a"`
	}
	withDottedKey struct {
		A int `yaml:"a.b"`
	}
	recursive struct {
		Next *recursive `yaml:"next"`
	}
	withPtrScalar struct{ P *int }
)

func TestProgrammerMistakesPanic(t *testing.T) {
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil {
				t.Errorf("%s: no panic", name)
			} else if s, _ := r.(string); !strings.Contains(s, want) {
				t.Errorf("%s: panic %v, want it to contain %q", name, r, want)
			}
		}()
		f()
	}
	mustPanic("map", "unsupported type map[string]int", func() { Load(&withMap{}, nil, nil) })
	mustPanic("pointer to int", "unsupported type *int", func() { Load(&withPtrScalar{}, nil, nil) })
	mustPanic("duplicate", `share the key "a"`, func() { Load(&withDup{}, nil, nil) })
	mustPanic("dotted", `key "a.b" must be a plain name`, func() { Load(&withDottedKey{}, nil, nil) })
	mustPanic("recursive", "contains itself", func() { Help(new(strings.Builder), &recursive{}) })
	mustPanic("not a pointer", "want a non-nil pointer", func() { Load(defaultTrainConfig(), nil, nil) })
	mustPanic("nil", "want a non-nil pointer", func() { Load((*trainConfig)(nil), nil, nil) })
	mustPanic("flag clash", "clashes", func() {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("rollout.n", 1, "")
		cfg := defaultTrainConfig()
		Load(&cfg, nil, fs)
	})
	mustPanic("help flag", "clashes", func() {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Bool("h", false, "")
		cfg := defaultTrainConfig()
		Load(&cfg, nil, fs)
	})
}
