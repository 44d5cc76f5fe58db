package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// roundTrip dumps cfg, reads the dump back into a zero config (no Validate:
// the fuzzer finds values a section refuses) and dumps again; the two
// dumps must match, so what Load accepted Dump can write and Load reread.
func roundTrip(t *testing.T, cfg *trainConfig) {
	t.Helper()
	var first bytes.Buffer
	if err := Dump(&first, cfg); err != nil {
		t.Fatalf("dump: %v", err)
	}
	var again trainConfig
	l := &loader{root: reflect.TypeOf(again)}
	l.file = "dump.yaml"
	applyText(l, first.Bytes(), reflect.ValueOf(&again).Elem())
	if len(l.errs) > 0 {
		t.Fatalf("rereading the dump: %v\n%s", l.errs, first.String())
	}
	var second bytes.Buffer
	if err := Dump(&second, &again); err != nil {
		t.Fatalf("second dump: %v", err)
	}
	if first.String() != second.String() {
		t.Fatalf("dump changed on reload:\n%s\nthen\n%s", first.String(), second.String())
	}
}

// FuzzOverride feeds arbitrary command-line arguments (split on NUL) to
// Load: it must never panic, every failure must be a usage *Error, and
// every success must survive a dump and reload.
func FuzzOverride(f *testing.F) {
	for _, seed := range []string{
		"actor.lr=1e-6",
		"trainer.logger=[console,jsonl]",
		"trainer.logger=['console','wandb']",
		"data.train_files=a.parquet,b.parquet",
		"data.train_files=[\"a,b\", c]",
		"rollout.tool_timeout=1h2m3s",
		"rollout.stop_token_ids=[1, 0x2, -3]",
		"rollout.seed=18446744073709551615",
		"trainer.max_actor_ckpt_to_keep=256",
		"critic={lr: 1e-5}\x00algorithm.adv_estimator=gae",
		"critic=null",
		"actor={lr: [1]}",
		"actor.optim.betas=[.inf, -.nan]",
		"model.dtype=fp16",
		"model.path='it''s'",
		"trainer.experiment_name=\"\\u00e9\\x00\"",
		"-trainer.resume\x00--rollout.n\x007",
		"-h",
		"--\x00-x=1",
		"actor_rollout_ref.rollout.n=8",
		"=",
		"a.b.c.d=",
		"data={train_files: *x}",
		"data={train_files: &x [a], val_files: *x}",
		"actor={<<: {lr: 2}}",
		"critic=&a {<<: *a}",
		"actor=&a {optim: *a}",
		"rollout.n=1_0",
		"seed=-0x8000000000000000",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		cfg := defaultTrainConfig()
		err := Load(&cfg, args, nil)
		if err == ErrHelp {
			return
		}
		if err != nil {
			for _, e := range usageErrors(t, err) {
				if !strings.HasPrefix(e.Error(), "config: ") || e.Msg == "" {
					t.Fatalf("malformed error %q", e.Error())
				}
			}
			return
		}
		roundTrip(t, &cfg)
	})
}

// FuzzFile feeds arbitrary bytes as a -config file.
func FuzzFile(f *testing.F) {
	for _, seed := range []string{
		fullFile,
		"actor:\n  lr: abc\n",
		"actor: &a\n  lr: 1\ncritic: *a\n",
		"a: &a [*a]\n",
		"<<: {seed: 3}\n",
		"seed: 1\n---\nseed: 2\n",
		"- x\n",
		"trainer:\n  logger: console,jsonl\n",
		"rollout:\n  n: 1\n  n: 2\n",
		"? [a]\n: b\n",
		"data:\n  train_files: !!binary aGVsbG8=\n",
		"seed: !!str 5\n",
		"\xff\xfe",
		"actor:\n\tlr: 1\n",
		"critic: ~\n",
		"rollout: {seed: -1}\n",
		"critic: &a\n  lr: 1\n  <<: *a\n",
		"l0: &l0 {n: 1}\nl1: &l1 {<<: [*l0, *l0]}\nl2: &l2 {<<: [*l1, *l1]}\nrollout: *l2\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := defaultTrainConfig()
		l := &loader{root: reflect.TypeOf(cfg), file: "fuzz.yaml"}
		applyText(l, data, reflect.ValueOf(&cfg).Elem())
		if len(l.errs) > 0 {
			for _, e := range l.errs {
				if ce, ok := e.(*Error); !ok || ce.File != "fuzz.yaml" || ce.Line < 0 {
					t.Fatalf("malformed error %v", e)
				}
			}
			return
		}
		roundTrip(t, &cfg)
	})
}
