package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// A full, valid file in the shape a user writes, read by Load and, as an
// independent reference, by yaml.v3's own decoder with KnownFields(true)
// into the same defaults: both must give the same struct.
const fullFile = `# GRPO on multi-hop QA
seed: 7
model:
  path: /models/Qwen2.5-3B-Instruct
  dtype: bf16
  enable_gradient_checkpointing: true
data:
  train_files:
    - /data/hotpotqa/train.parquet
    - /data/musique/train.parquet
  val_files: [/data/hotpotqa/validation.parquet]
  train_batch_size: 512
  max_prompt_length: 8192
actor:
  lr: 1.0e-6
  ppo_mini_batch_size: 128
  use_kl_loss: true
  kl_loss_coef: 0.001
  kl_loss_type: low_var_kl
  optim:
    betas: [0.9, 0.95]
    weight_decay: 0.0
rollout:
  n: 8
  temperature: 0.7
  top_p: 0.95
  tool_timeout: 1m30s
  stop_token_ids: [151645, 151643]
  seed: 18446744073709551615
algorithm:
  adv_estimator: gae
  gamma: 0.99
  lam: 0.95
trainer:
  total_training_steps: 1005
  save_freq: -1
  project_name: "agent-r1"
  experiment_name: 'hotpot: grpo #3'
  logger: [console, jsonl, tensorboard]
  max_actor_ckpt_to_keep: 255
critic:
  lr: 1e-5
  cliprange_value: 0.5
`

func TestFileMatchesYAMLv3(t *testing.T) {
	path := writeFile(t, "grpo.yaml", fullFile)
	got, err := load(t, "-config", path)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultTrainConfig()
	dec := yaml.NewDecoder(bytes.NewReader([]byte(fullFile)))
	dec.KnownFields(true)
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load gave\n%+v\nyaml.v3 gave\n%+v", got, want)
	}
	// Spot checks by hand, in case both decoders shared a mistake.
	if got.Rollout.ToolTimeout != 90*time.Second || got.Trainer.ExperimentName != "hotpot: grpo #3" ||
		got.Critic == nil || got.Critic.LR != 1e-5 || got.Rollout.Seed != 1<<64-1 || got.Data.ValFiles[0] != "/data/hotpotqa/validation.parquet" {
		t.Errorf("hand checks failed: %+v", got)
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Error // File is filled in by the test
	}{
		{"unknown key", "actor:\n  lr: 1e-6\n  lrr: 2\n", []Error{
			{Line: 3, Key: "actor.lrr", Msg: "unknown key; did you mean actor.lr?"}}},
		{"unknown section", "seed: 1\nactr:\n  lr: 1\n", []Error{
			{Line: 2, Key: "actr", Msg: "unknown key; did you mean actor?"}}},
		{"verl name", "actor_rollout_ref:\n  rollout:\n    n: 8\n", []Error{
			{Line: 1, Key: "actor_rollout_ref", Msg: "unknown key; the top level has seed, model, data, actor, rollout, algorithm, trainer, critic"}}},
		{"bad value", "rollout:\n  n: 8\n  temperature: hot\n", []Error{
			{Line: 3, Key: "rollout.temperature", Msg: `"hot" is not a float`}}},
		{"several", "actor:\n  lr: abc\n  ppo_epochs: 1.5\ntrainer:\n  logger: console,jsonl\n", []Error{
			{Line: 2, Key: "actor.lr", Msg: `"abc" is not a float`},
			{Line: 3, Key: "actor.ppo_epochs", Msg: `"1.5" is not an int`},
			{Line: 5, Key: "trainer.logger", Msg: `"console,jsonl" is one value; write a list as [console,jsonl]`}}},
		{"list element", "data:\n  train_files:\n    - a.parquet\n    - {x: 1}\n", []Error{
			{Line: 4, Key: "data.train_files[1]", Msg: "a mapping is not a string"}}},
		{"section given a value", "actor: 1e-6\n", []Error{
			{Line: 1, Key: "actor", Msg: "actor is a section, not a value; set its keys (actor.lr=..., actor.ppo_mini_batch_size=...)"}}},
		{"value given a section", "seed:\n  a: 1\n", []Error{
			{Line: 2, Key: "seed", Msg: "a mapping is not an int"}}},
		{"empty value", "actor:\n  lr:\n", []Error{
			{Line: 2, Key: "actor.lr", Msg: "no value given; want a float"}}},
		{"duplicate", "rollout:\n  n: 1\n  n: 2\n", []Error{
			{Line: 3, Key: "rollout.n", Msg: "set twice (first on line 2)"}}},
		// yaml.v3 names the line where the broken mapping starts.
		{"syntax", "actor:\n  lr: 1\n bad: [\n", []Error{
			{Line: 2, Msg: "bad YAML: did not find expected key"}}},
		{"tab indent", "actor:\n\tlr: 1\n", []Error{
			{Line: 2, Msg: "bad YAML: found character that cannot start any token"}}},
		{"top level list", "- a\n- b\n", []Error{
			{Line: 1, Msg: "the top level must be a mapping of keys, not a list"}}},
		{"two documents", "seed: 1\n---\nseed: 2\n", []Error{
			{Line: 2, Msg: "holds more than one YAML document (a second --- starts here)"}}},
		{"complex key", "? [a, b]\n: 1\n", []Error{
			{Line: 1, Msg: "a key must be a name, not a list"}}},
		{"bad dtype", "model:\n  dtype: int4\n", []Error{
			{Line: 2, Key: "model.dtype", Msg: `"int4" is not a dtype: want bf16, fp16 or fp32`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.yaml", tc.text)
			_, err := load(t, "-config", path)
			es := usageErrors(t, err)
			if len(es) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(es), len(tc.want), err)
			}
			for i, e := range es {
				w := tc.want[i]
				w.File = path
				e.Err = nil
				if *e != w {
					t.Errorf("error %d:\ngot  %+v\nwant %+v", i, *e, w)
				}
			}
		})
	}
}

func TestFileErrorText(t *testing.T) {
	path := writeFile(t, "train.yaml", "actor:\n  lr: abc\n")
	_, err := load(t, "-config", path)
	wantErrorContaining(t, err, "config: "+path+`:2: actor.lr: "abc" is not a float`)
}

func TestFileYAMLFeatures(t *testing.T) {
	path := writeFile(t, "anchors.yaml", `
defaults: &opt
  weight_decay: 0.05
  lr_warmup_steps: 10
`[1:])
	// Keys must all be known, so anchors live inside known sections.
	_, err := load(t, "-config", path)
	wantErrorContaining(t, err, "defaults: unknown key")

	path = writeFile(t, "anchors.yaml", `
actor:
  optim: &opt
    weight_decay: 0.05
    lr_warmup_steps: 10
  lr: &lr 3e-6
critic:
  lr: *lr
  <<: {cliprange_value: 0.3, lr: 1}
rollout:
  n: 0x10
  max_turns: 1_0
trainer:
  logger:
  project_name: ~
  experiment_name: "null"
  default_local_dir: |
    line one
    line two
`[1:])
	cfg, err := load(t, "-config", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Actor.Optim.WeightDecay != 0.05 || cfg.Actor.Optim.WarmupSteps != 10 || cfg.Actor.LR != 3e-6 {
		t.Errorf("actor %+v", cfg.Actor)
	}
	// The merged lr (1) loses to the mapping's own lr (*lr), as YAML says.
	if cfg.Critic == nil || *cfg.Critic != (criticConfig{LR: 3e-6, CliprangeValue: 0.3}) {
		t.Errorf("critic %+v", cfg.Critic)
	}
	if cfg.Rollout.N != 16 || cfg.Rollout.MaxTurns != 10 {
		t.Errorf("rollout %+v", cfg.Rollout)
	}
	// An empty list value clears the list; null is an empty string; a
	// quoted "null" is the text null.
	if cfg.Trainer.Logger != nil || cfg.Trainer.ProjectName != "" || cfg.Trainer.ExperimentName != "null" ||
		cfg.Trainer.DefaultLocalDir != "line one\nline two\n" {
		t.Errorf("trainer %+v", cfg.Trainer)
	}
}

func TestEmptyAndNullFiles(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n", "~\n", "---\n"} {
		path := writeFile(t, "empty.yaml", text)
		cfg, err := load(t, "-config", path)
		if err != nil {
			t.Errorf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(cfg, defaultTrainConfig()) {
			t.Errorf("%q changed the config", text)
		}
	}
}

func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	_, err := load(t, "-config", dir)
	wantErrorContaining(t, err, "config: "+dir+": ")
	_, err = load(t, "-config", dir+"/missing.yaml")
	es := usageErrors(t, err)
	if len(es) != 1 || !os.IsNotExist(es[0].Err) {
		t.Errorf("missing file: %v", err)
	}
}

func TestFileAliasAbuse(t *testing.T) {
	// A merge cycle and an alias bomb both end in an error, promptly.
	cycle := writeFile(t, "cycle.yaml", "critic: &a\n  lr: 1\n  <<: *a\n")
	_, err := load(t, "-config", cycle)
	wantErrorContaining(t, err, "cycle.yaml:1: critic: an alias or merge (<<) includes the mapping it is in")

	// rollout merges l0..l30, where l30 merges l29 twice, which merges
	// l28 twice, ...: 2^31 copies of n: 1 from a 1 kB file.
	var b strings.Builder
	b.WriteString("rollout:\n  <<: [&l0 {n: 1}")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, ", &l%d {<<: [*l%d, *l%d]}", i, i-1, i-1)
	}
	b.WriteString("]\n")
	_, err = load(t, "-config", writeFile(t, "bomb.yaml", b.String()))
	wantErrorContaining(t, err, "bomb.yaml:2: rollout", "aliases expand to over 65536 values; stopped")
	if es := usageErrors(t, err); len(es) != 1 {
		t.Errorf("got %d errors, want 1", len(es))
	}
}

func TestErrorCountCapped(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "unknown%d: 1\n", i)
	}
	_, err := load(t, "-config", writeFile(t, "many.yaml", b.String()))
	es := usageErrors(t, err)
	if len(es) != 21 || es[19].Line != 20 || es[20].Error() != "config: and 30 more errors" {
		t.Errorf("got %d errors, last %v", len(es), es[len(es)-1])
	}
}
