package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/cmd/internal/config"
)

// TestEveryBadSettingFailsBeforeWork covers every validation: each bad
// value fails when the config is loaded, naming its section and key, and a
// run given the same config built in Go fails before its run folder exists.
func TestEveryBadSettingFailsBeforeWork(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want string // section: key, as the error names it
	}{
		// Clip ratios: NaN, negative, a lower clip of 1, a dual clip c ≤ 1.
		{"actor.clip_ratio=nan", "actor: clip_ratio NaN"},
		{"actor.clip_ratio=-0.1", "actor: clip_ratio -0.1"},
		{"actor.clip_ratio_low=nan", "actor: clip_ratio_low NaN"},
		{"actor.clip_ratio_high=inf", "actor: clip_ratio_high +Inf"},
		{"actor.clip_ratio_low=1", "actor: clip_ratio_low 1"},
		{"actor.clip_ratio_c=1", "actor: clip_ratio_c 1"},
		{"actor.clip_ratio_c=0.5", "actor: clip_ratio_c 0.5"},
		{"actor.clip_ratio_c=nan", "actor: clip_ratio_c NaN"},
		{"actor.policy_loss=value", `actor: policy_loss: rl: unknown loss "value"`},
		{"actor.loss_agg_mode=token-sum", "actor.loss_agg_mode"},
		{"actor.loss_scale_factor=-1", "actor: loss_scale_factor -1"},
		{"actor.entropy_coeff=nan", "actor: entropy_coeff NaN"},
		{"actor.kl_loss_type=k4", "actor: kl_loss_type"},
		{"actor.ppo_epochs=0", "actor: ppo_epochs 0"},
		{"actor.ppo_mini_batch_size=0", "ppo_mini_batch_size 0"},
		{"algorithm.adv_estimator=nope", `algorithm: adv_estimator: rl: unknown advantage estimator "nope"`},
		{"algorithm.gamma=1.5", "algorithm: gamma 1.5"},
		{"algorithm.lam=nan", "lam NaN"},
		{"algorithm.kl_ctrl=pid", `algorithm: kl_ctrl "pid"`},
		{"algorithm.kl_penalty=k4", "algorithm: kl_penalty"},
		{"algorithm.kl_coef=-1", "algorithm: kl_coef -1"},
		{"critic.cliprange_value=-0.5", "critic: cliprange_value -0.5"},
		{"critic.critic_warmup=-1", "critic: critic_warmup -1"},
		{"sft.batch_size=0", "sft: batch_size 0"},
		{"sft.steps=-1", "sft: steps -1"},
		{"sft.fraction=0", "sft: fraction 0"},
		{"sft.early_answer=2", "sft: early_answer 2"},
		{"sft.max_hops=-1", "sft: max_hops -1"},
		{"env.max_turns=-1", "env: max_turns -1"},
		{"env.max_tool_response_length=-1", "env: max_tool_response_length -1"},
		{"env.topk=0", "env: topk 0"},
		{"env.style=openai", `env: style "openai"`},
		{"env.reward=bleu", "env: reward"},
		{"env.tools=[search,calc]", `env: tools: unknown tool "calc"`},
		{"env.tools=[]", "env: tools: no tools"},
		{"env.max_parallel_calls=0", "env: max_parallel_calls 0"},
		{"env.truncate_side=top", `env: truncate_side "top"`},
		{"env.call_timeout=-1s", "env: call_timeout -1s"},
		{"env.retriever_wait=-1s", "env: retriever_wait -1s"},
		{"env.format=html", `env: format "html"`},
		{"data.val_size=-1", "data: val_size -1"},
		{"data.train_batch_size=0", "data: train_batch_size 0"},
		{"data.synth_train=-5", "data: synth_train -5"},
		{"data.synth_hop_weights=[1,1]", "data: synth_hop_weights"},
		{"trainer.save_freq=-1", "trainer: save_freq -1"},
		{"trainer.test_freq=-2", "trainer: test_freq -2"},
		{"trainer.total_training_steps=-1", "trainer: total_training_steps -1"},
		{"trainer.stop_after=-1", "trainer: stop_after -1"},
		{"rollout.slots=0", "rollout: rl: rollout slots 0 is smaller than n"},
		{"trainer.device=tpu", `trainer: device "tpu"`},
		{"trainer.max_tool_error_rate=1.5", "trainer: max_tool_error_rate 1.5"},
		{"data.on_bad_record=maybe", `data: data: data.on_bad_record "maybe"`},
		{"data.data_source=nowhere", "data: data: data.data_source"},
		{"data.data_sources=[popqa_test.jsonl]", "data: data: data.data_sources"},
		{"data.answer_column=gold", "data: data: data.answer_column"},
		{"data.max_skip_fraction=0", "data: data: data.max_skip_fraction 0"},
		{"data.max_skip_fraction=1.5", "data: data: data.max_skip_fraction 1.5"},
		{"rollout.n=0", "rollout: rl: rollout n 0"},
		{"rollout.external_timeout=-1s", "rollout: rl: rollout.external_timeout -1s"},
		{"rollout.sampling.temperature=-1", "rollout"},
		{"actor.optim.lr=-1", "actor.optim"},
		{"sft.optim.schedule=linear", "sft.optim"},
		{"model.max_context=100", "model.max_context 100"},
		{"rollout.trajectory=turns", `rollout: rl: rollout.trajectory "turns"`},
		{"env.context=summary", `env: context "summary"`},
		{"env.context_turns=0", "env: context_turns 0"},
		{"env.context=window", "env.context window builds the prompts of step mode"},
	} {
		cfg := DefaultConfig()
		err := config.Load(&cfg, []string{tc.arg}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %s: error %v, want one naming %q", tc.arg, err, tc.want)
			continue
		}
		// A value the loader could parse stays in cfg (its check failed,
		// not its syntax): the same config handed to run must fail too,
		// before the run folder is made.
		if tc.arg == "actor.loss_agg_mode=token-sum" {
			continue // refused by its type while read; nothing to run
		}
		dir := filepath.Join(t.TempDir(), "run")
		cfg.Trainer.DefaultLocalDir = dir
		var out bytes.Buffer
		err = run(context.Background(), &cfg, &out)
		if err == nil {
			t.Errorf("run with %s: no error", tc.arg)
			continue
		}
		key := tc.want
		if i := strings.Index(key, ": "); i > 0 && !strings.HasPrefix(tc.want, "model.") {
			key = key[:i] // the section; the rest is the same message
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("run with %s: error %v, want one naming %q", tc.arg, err, key)
		}
		if _, serr := os.Stat(dir); serr == nil {
			t.Errorf("run with %s: the run folder exists after the error %v", tc.arg, err)
		}
		if out.Len() != 0 {
			t.Errorf("run with %s: printed before failing:\n%s", tc.arg, out.String())
		}
	}
}

// TestLongPromptsFailAtLoad checks that prompts longer than
// rollout.max_prompt_tokens are counted and named when the data is loaded,
// before the warm start, not at the RL step that draws one.
func TestLongPromptsFailAtLoad(t *testing.T) {
	dir := t.TempDir()
	c := testConfig(t, dir)
	c.RL.Rollout.MaxPromptTokens = 40
	var out bytes.Buffer
	err := run(context.Background(), &c, &out)
	if err == nil {
		t.Fatal("no error with max_prompt_tokens 40")
	}
	msg := err.Error()
	for _, want := range []string{"rollout.max_prompt_tokens 40", "of 300 prompts are longer", "#0 ", "tokens)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(out.String(), "sft step") {
		t.Errorf("the warm start ran before the error:\n%s", out.String())
	}
}

// TestStepModeSettings checks the settings of step mode that span
// sections: an estimator that credits sequences cannot take the turns of a
// context that rewrites, and the window must hold one turn, not the whole
// transcript.
func TestStepModeSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for a config that loads
	}{
		{[]string{"rollout.trajectory=step"}, ""},
		{[]string{"rollout.trajectory=step", "env.context=window", "algorithm.adv_estimator=step_grpo"}, ""},
		{[]string{"rollout.trajectory=step", "env.context=drop_observations", "algorithm.adv_estimator=reinforce_plus_plus"}, "algorithm.adv_estimator reinforce_plus_plus credits each packed sequence"},
		{[]string{"rollout.trajectory=step", "rollout.merge_prefix=false", "algorithm.adv_estimator=gae"}, "algorithm.adv_estimator gae"},
		{[]string{"rollout.trajectory=step", "algorithm.adv_estimator=gae"}, ""},
		// Step mode lets the transcript outgrow the window; whole mode does not.
		{[]string{"rollout.trajectory=step", "env.context=window", "rollout.max_response_tokens=4000"}, ""},
		{[]string{"rollout.max_response_tokens=4000"}, "model.max_context 1280 is below"},
		{[]string{"rollout.trajectory=step", "model.max_context=560"}, "model.max_context 560 must exceed rollout.max_prompt_tokens + rollout.max_turn_tokens (576)"},
		{[]string{"rollout.max_turn_tokens=700"}, "rollout.max_turn_tokens 700 exceeds rollout.max_response_tokens 640"},
	} {
		cfg := DefaultConfig()
		err := config.Load(&cfg, tc.args, nil)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}
