package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// flatten turns a decoded YAML mapping into dotted key -> value.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := joinKey(prefix, k)
		if sub, ok := v.(map[string]any); ok {
			flatten(key, sub, out)
			continue
		}
		out[key] = v
	}
}

type helpLine struct{ typ, def, help string }

// parseHelp reads Help's key lines back: two spaces, then columns
// separated by at least two spaces.
func parseHelp(t *testing.T, text string) (map[string]helpLine, []string) {
	t.Helper()
	cols := regexp.MustCompile(` {2,}`)
	rows := map[string]helpLine{}
	var headers []string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "  "):
			c := cols.Split(strings.TrimPrefix(line, "  "), -1)
			if len(c) < 3 {
				t.Fatalf("help line %q has %d columns", line, len(c))
			}
			h := helpLine{typ: c[1], def: c[2]}
			if len(c) > 3 {
				h.help = strings.Join(c[3:], "  ")
			}
			rows[c[0]] = h
		case strings.HasSuffix(strings.Fields(line + " x")[0], ":") && !strings.HasPrefix(line, "Config keys") && !strings.HasPrefix(line, "Example:"):
			headers = append(headers, line)
		}
	}
	return rows, headers
}

// Every key and its default, as yaml.v3 itself marshals the defaults,
// appears in Help: the key set and the values come from an encoder that
// is not this package's.
func TestHelpListsEveryKeyWithItsDefault(t *testing.T) {
	cfg := defaultTrainConfig()
	var b strings.Builder
	Help(&b, &cfg)
	rows, _ := parseHelp(t, b.String())

	want := map[string]any{}
	for _, part := range []struct {
		prefix string
		v      any
	}{{"", cfg}, {"critic", criticConfig{}}} { // an unset optional section shows zero values
		out, err := yaml.Marshal(part.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		flatten(part.prefix, m, want)
	}
	delete(want, "critic") // yaml.v3 writes the nil section as critic: null

	var missing []string
	for key, value := range want {
		row, ok := rows[key]
		if !ok {
			missing = append(missing, key)
			continue
		}
		var got any
		if err := yaml.Unmarshal([]byte(row.def), &got); err != nil {
			t.Errorf("%s: default %q is not YAML: %v", key, row.def, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(value) {
			t.Errorf("%s: help shows default %q (%v), yaml.v3 has %v", key, row.def, got, value)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys missing from help: %v", missing)
	}
	if len(rows) != len(want) {
		t.Errorf("help has %d keys, yaml.v3 %d", len(rows), len(want))
	}
	if !strings.Contains(b.String(), "\nExample: model.dtype=bf16 data.train_files=[data/train.parquet]\n") {
		t.Errorf("help lacks the example line:\n%s", b.String())
	}
}

func TestHelpTypesTextAndSections(t *testing.T) {
	cfg := defaultTrainConfig()
	var b strings.Builder
	Help(&b, &cfg)
	text := b.String()
	rows, headers := parseHelp(t, text)
	for key, want := range map[string]helpLine{
		"seed":                   {"int", "1", "random seed"},
		"model.path":             {"string", `""`, "Hugging Face model folder"},
		"model.dtype":            {"dtype", "bf16", "compute dtype"},
		"actor.lr":               {"float", "1e-06", "actor learning rate"},
		"actor.optim.betas":      {"[]float", "[0.9, 0.999]", "AdamW beta1, beta2"},
		"data.shuffle":           {"bool", "true", "shuffle the training set every epoch"},
		"data.val_files":         {"[]string", "[]", "validation parquet files"},
		"rollout.tool_timeout":   {"duration", "30s", "longest wait for one tool call"},
		"rollout.stop_token_ids": {"[]int", "[]", "extra stop token ids"},
		"rollout.seed":           {"uint", "0", "sampling seed"},
		"trainer.logger":         {"[]string", "[console, jsonl]", "console, jsonl, tensorboard"},
		"critic.lr":              {"float", "0.0", "critic learning rate"},
	} {
		if got := rows[key]; got != want {
			t.Errorf("%s: got %+v, want %+v", key, got, want)
		}
	}
	wantHeaders := []string{
		"model:  policy model",
		"data:  datasets",
		"actor:  policy optimisation",
		"actor.optim:  optimizer",
		"rollout:  multi-turn sampling",
		"algorithm:",
		"trainer:",
		"critic:  value model, for GAE (optional, unset (null) by default)",
	}
	if !reflect.DeepEqual(headers, wantHeaders) {
		t.Errorf("headers\n%q\nwant\n%q", headers, wantHeaders)
	}
	// Keys sit under their section's title, in declaration order.
	if i, j := strings.Index(text, "actor.optim:"), strings.Index(text, "actor.optim.betas"); i < 0 || j < i {
		t.Errorf("actor.optim.betas is not under its title")
	}
	if i, j := strings.Index(text, "  actor.lr"), strings.Index(text, "  actor.ppo_mini_batch_size"); i < 0 || j < i {
		t.Errorf("actor keys out of order")
	}
}

func TestHelpShowsCurrentValues(t *testing.T) {
	// Help prints what it is given: after a load, the resolved values.
	cfg := defaultTrainConfig()
	if err := Load(&cfg, []string{"actor.lr=3e-6", "critic.lr=2e-5"}, nil); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Help(&b, cfg)
	rows, headers := parseHelp(t, b.String())
	if rows["actor.lr"].def != "3e-06" || rows["critic.lr"].def != "2e-05" {
		t.Errorf("actor.lr %q critic.lr %q", rows["actor.lr"].def, rows["critic.lr"].def)
	}
	if last := headers[len(headers)-1]; last != "critic:  value model, for GAE" {
		t.Errorf("set optional section titled %q", last)
	}
}
