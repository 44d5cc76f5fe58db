package data

import (
	"strings"
	"testing"
)

func TestSettings(t *testing.T) {
	o, err := Settings{DataSource: "nq", DataSources: []string{"popqa_test.jsonl=popqa", " a/b.jsonl = hotpotqa "}, PromptJSON: true, AnswerColumn: "golden_answers", OnBadRecord: "skip", MaxSkipFraction: 0.1}.LoadOptions()
	if err != nil || !o.SkipMalformed || o.DataSource != "nq" || o.DataSources["popqa_test.jsonl"] != "popqa" || o.DataSources["a/b.jsonl"] != "hotpotqa" || !o.PromptJSON || o.AnswerColumn != "golden_answers" {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := DefaultSettings().LoadOptions(); err != nil || o.SkipMalformed || o.DataSources != nil || o.MaxSkipFraction != DefaultMaxSkipFraction {
		t.Errorf("default settings: %+v %v", o, err)
	}
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{OnBadRecord: "ignore"}, "data.on_bad_record"},
		{Settings{DataSource: "mystery"}, "data.data_source"},
		{Settings{DataSources: []string{"popqa"}}, "not FILE=SOURCE"},
		{Settings{DataSources: []string{"x.jsonl=gsm8k"}}, `x.jsonl: unknown data_source "gsm8k"`},
		{Settings{AnswerColumn: "label"}, "data.answer_column"},
	} {
		tc.s.MaxSkipFraction = DefaultMaxSkipFraction
		if _, err := tc.s.LoadOptions(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
}
