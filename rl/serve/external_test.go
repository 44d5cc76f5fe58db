package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/r1go/r1go/data/synth"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/examples/search_agent/goagent"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/optim"
	"github.com/r1go/r1go/rl"
)

// passageTool answers every search with one fixed passage.
type passageTool struct{}

func (passageTool) Name() string { return "search" }
func (passageTool) Description() string {
	return "Search for information on the internet using Wikipedia as a knowledge source."
}
func (passageTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string", "description": "Search query"}}, "required": ["query"]}`)
}
func (passageTool) Call(ctx context.Context, args json.RawMessage) (env.Result, error) {
	return env.Result{Content: passage, Success: true}, nil
}

const passage = `Doc 1(Title: "Disonrar") Disonrar works for Velmora Works, founded by Nurkum.`

// externalFixture is a trainer in rollout.mode=external on its own copy of
// the warm-start policy, its server, and a Go agent recording the ids the
// server returned.
type externalFixture struct {
	tr    *rl.Trainer
	ext   *External
	url   string
	mu    sync.Mutex
	turns map[string][]goagent.Turn
	agent *goagent.Agent
}

func newExternalFixture(t *testing.T) *externalFixture {
	m, err := model.Load(warmstart, model.NewCPU(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(warmstart)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := env.DefaultConfig()
	ecfg.Prefill, ecfg.MaxTurns, ecfg.MaxResponseChars = "", 3, 512
	ecfg.Instruction = "Search for every fact you need, then answer in <answer></answer>."
	e, err := env.New(ecfg, passageTool{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rl.DefaultTrainerConfig()
	cfg.Actor.UseKLLoss = false
	cfg.Actor.MiniBatchSize = 64
	cfg.Actor.MicroBatchTokens = 4096
	cfg.Actor.Optim.LR = 1e-4
	r := &cfg.Rollout
	r.N, r.MaxTurnTokens, r.MaxResponseTokens, r.MaxPromptTokens, r.Seed, r.Mode = 3, 48, 400, 512, 5, "external"
	var stop []int32
	for _, s := range []string{"</tool_call>", "<|im_end|>", "<|endoftext|>"} {
		id, _ := tok.TokenID(s)
		stop = append(stop, int32(id))
	}
	eng := rl.NewEngine(rl.NewModelPolicy(m, 8, 1280), 0)
	f := &externalFixture{turns: map[string][]goagent.Turn{}}
	tr := &rl.Trainer{Cfg: cfg, Policy: m, ToolCallEnd: stop[0], KLCtrl: cfg.NewKLController()}
	f.ext = NewExternal(&tr.Cfg.Rollout, tok, e, eng, stop)
	tr.Source = f.ext
	if tr.ActorOpt, err = optim.New(m.Dev, m.Params, m.Grads, cfg.Actor.Optim, 10); err != nil {
		t.Fatal(err)
	}
	f.tr = tr
	srv, err := New(DefaultConfig(), eng, tok)
	if err != nil {
		t.Fatal(err)
	}
	srv.Episodes = f.ext
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { f.ext.Close(); ts.Close() })
	f.url = ts.URL
	f.agent = &goagent.Agent{BaseURL: ts.URL + "/v1", MaxTurns: 4,
		Search: func(ctx context.Context, q string) (string, error) { return passage, nil },
		OnTurn: func(ep string, turn goagent.Turn) {
			f.mu.Lock()
			f.turns[ep] = append(f.turns[ep], turn)
			f.mu.Unlock()
		}}
	return f
}

// TestExternalTrainsOnServedTokens: in rollout.mode=external the trainer
// serves an agent's chat requests from the live policy and trains on
// exactly the token ids it served: each trajectory of the step is the last
// request's prompt ids followed by its completion ids, the action mask is
// true on the completion ids of every request and nowhere else, the batch
// the update reads holds those ids, and GRPO groups are the N episodes of
// one task. A request of an episode of a finished batch is refused.
func TestExternalTrainsOnServedTokens(t *testing.T) {
	f := newExternalFixture(t)
	w := synth.Default()
	prompts := w.Train[:2]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agentErr := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { agentErr <- f.agent.Work(ctx) }()
	}
	res, err := f.tr.Step(ctx, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trajectories) != 6 {
		t.Fatalf("%d trajectories, want 2 tasks × 3", len(res.Trajectories))
	}
	b := rl.FromTrajectories(res.Trajectories, true)
	multi := 0
	for k, tr := range res.Trajectories {
		id := fmt.Sprintf("ep-1-%d-%d", k/3, k%3)
		turns := f.turns[id]
		if len(turns) == 0 {
			t.Fatalf("%s: the agent recorded no turns", id)
		}
		if tr.Group != k/3 || tr.Sample.ID != prompts[k/3].ID {
			t.Fatalf("%s: group %d sample %s", id, tr.Group, tr.Sample.ID)
		}
		last := turns[len(turns)-1]
		want := append(slices.Clone(last.Prompt), last.Completion...)
		if !slices.Equal(tr.Tokens, want) {
			t.Fatalf("%s: trajectory tokens differ from the served ids\n got %v\nwant %v", id, tr.Tokens, want)
		}
		// What was appended between two turns is what the built-in
		// rollout appends: the environment's observation, encoded once.
		ep := f.ext.Env.Episode()
		ep.Reset(tr.Sample)
		for j := 1; j < len(turns); j++ {
			prev := turns[j-1]
			end := len(prev.Prompt) + len(prev.Completion)
			res := ep.Step(ctx, f.ext.Tok.Decode(toInts(prev.Completion)))
			obs := toInt32(f.ext.Tok.Encode(res.Observation))
			if got := turns[j].Prompt[end:]; !slices.Equal(got, obs) {
				t.Fatalf("%s turn %d: appended %q, the built-in rollout appends %q",
					id, j, f.ext.Tok.Decode(toInts(got)), res.Observation)
			}
		}
		mask := make([]bool, len(want))
		for _, turn := range turns {
			if !slices.Equal(turn.Prompt, want[:len(turn.Prompt)]) {
				t.Fatalf("%s: a turn's prompt is not a prefix of the trajectory", id)
			}
			for i := range turn.Completion {
				mask[len(turn.Prompt)+i] = true
			}
		}
		if !slices.Equal(tr.Action, mask) {
			t.Fatalf("%s: action mask %v, want the served completions %v", id, tr.Action, mask)
		}
		s, e := b.Seq(k)
		if !slices.Equal(b.Tokens[s:e], want) || !slices.Equal(b.ActionMask[s:e], mask) {
			t.Fatalf("%s: the trained batch differs from the served ids", id)
		}
		if tr.PromptLen != len(turns[0].Prompt) || tr.Turns != len(turns) {
			t.Fatalf("%s: prompt %d turns %d, served %d and %d", id, tr.PromptLen, tr.Turns, len(turns[0].Prompt), len(turns))
		}
		if len(turns) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Fatal("no episode had a second turn; the appended tool replies went untested")
	}
	if _, ok := res.Metrics["actor/pg_loss"]; !ok {
		t.Fatalf("no actor update: %v", res.Metrics)
	}
	t.Logf("%d of 6 episodes multi-turn; score mean %.3f", multi, res.Metrics["critic/score/mean"])

	// The batch is closed: its episodes are refused with a clear error.
	st, raw := postEpisode(t, f.url, "ep-1-0-0")
	if st != 409 || !strings.Contains(string(raw), "stale") {
		t.Fatalf("stale episode: %d %s", st, raw)
	}
	cancel()
	for i := 0; i < 3; i++ {
		if err := <-agentErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
}

func postEpisode(t *testing.T, url, id string) (int, []byte) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set(EpisodeHeader, id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

// TestExternalRefusals: the episode protocol's errors, each with its
// status and a message naming the problem, and a batch that completes
// once every episode has its reward.
func TestExternalRefusals(t *testing.T) {
	f := newExternalFixture(t)
	w := synth.Default()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { _, err := f.ext.Run(ctx, 0, w.Train[:1]); done <- err }()
	var task *goagent.Task
	for task == nil {
		var err error
		if task, _, err = f.agent.Claim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	call := func(ep string, body string) (int, string) {
		req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set(EpisodeHeader, ep)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Message
	}
	reward := func(ep, body string) (int, string) {
		st, raw := post(t, f.url+"/v1/episodes/"+ep+"/reward", body)
		return st, string(raw)
	}
	first, _ := json.Marshal(map[string]any{"messages": task.Messages, "tools": task.Tools})
	for _, tc := range []struct {
		status int
		want   string
		do     func() (int, string)
	}{
		{404, "unknown", func() (int, string) { return call("mine", string(first)) }},
		{409, "no completion", func() (int, string) { return reward(task.EpisodeID, `{"reward": 1}`) }},
		{400, "the reward body is not", func() (int, string) { return reward(task.EpisodeID, `{"reward": "x"}`) }},
		{400, "n = 1", func() (int, string) { return call(task.EpisodeID, strings.Replace(string(first), `{`, `{"n": 2, `, 1)) }},
		{400, "data.apply_chat_template_kwargs", func() (int, string) {
			return call(task.EpisodeID, strings.Replace(string(first), `{`, `{"chat_template_kwargs": {"enable_thinking": false}, `, 1))
		}},
		{200, "", func() (int, string) { return call(task.EpisodeID, string(first)) }},
		{400, "must repeat", func() (int, string) { return call(task.EpisodeID, string(first)) }},
		{400, "turn rewards", func() (int, string) {
			return reward(task.EpisodeID, `{"reward": 1, "turn_rewards": [1, 2, 3, 4, 5, 6]}`)
		}},
		{200, "", func() (int, string) { return reward(task.EpisodeID, `{"reward": 0.5}`) }},
		{409, "already has its reward", func() (int, string) { return reward(task.EpisodeID, `{}`) }},
	} {
		st, msg := tc.do()
		if st != tc.status || !strings.Contains(msg, tc.want) {
			t.Fatalf("status %d %q, want %d with %q", st, msg, tc.status, tc.want)
		}
	}
	// The other two episodes of the group, scored by the trainer.
	for i := 0; i < 2; i++ {
		var tk *goagent.Task
		for tk == nil {
			var err error
			if tk, _, err = f.agent.Claim(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if tk.TaskID != task.TaskID {
			t.Fatalf("task %s in the group of %s", tk.TaskID, task.TaskID)
		}
		if err := f.agent.Episode(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.agent.Claim(ctx); ok || err != nil {
		t.Fatalf("a claim after the batch: %v %v", ok, err)
	}
	f.ext.Close()
	if _, _, err := f.agent.Claim(ctx); !errors.Is(err, goagent.ErrDone) {
		t.Fatalf("a claim after Close: %v", err)
	}
}

// TestExternalSilentEpisodes: with rollout.external_timeout set, an episode
// claimed by an agent that then falls silent is handed out again under a
// new id (the old one is refused as stale) and a live agent completes the
// batch; with no agent at all, the step fails naming the setting and the
// episodes that have no reward, instead of waiting forever.
func TestExternalSilentEpisodes(t *testing.T) {
	f := newExternalFixture(t)
	f.ext.Cfg.ExternalTimeout = 400 * time.Millisecond
	var logged []string
	f.ext.Log = func(s string) { logged = append(logged, s) }
	ctx := context.Background()
	w := synth.Default()
	type result struct {
		trajs []*rl.Trajectory
		err   error
	}
	done := make(chan result, 1)
	go func() { tr, err := f.ext.Run(ctx, 0, w.Train[:1]); done <- result{tr, err} }()
	var dead *goagent.Task // claimed, never touched
	for dead == nil {
		var err error
		if dead, _, err = f.agent.Claim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var res result
	var released []string
live:
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case res = <-done:
			break live
		default:
		}
		task, ok, err := f.agent.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if strings.Contains(task.EpisodeID, "-r") {
			released = append(released, task.EpisodeID)
		}
		if err := f.agent.Episode(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if res.err != nil || len(res.trajs) != 3 {
		t.Fatalf("the batch did not complete: %v, %d trajectories", res.err, len(res.trajs))
	}
	if f.ext.Released != 1 || len(released) != 1 || released[0] != dead.EpisodeID+"-r1" || len(logged) != 1 || !strings.Contains(logged[0], dead.EpisodeID) {
		t.Fatalf("released %d (%v), logged %q; want %s handed out again once", f.ext.Released, released, logged, dead.EpisodeID)
	}
	for _, tr := range res.trajs {
		if tr.Turns == 0 || tr.Outcome.Metrics == nil {
			t.Errorf("an unfinished trajectory in the batch: %d turns", tr.Turns)
		}
	}
	body, _ := json.Marshal(map[string]any{"messages": dead.Messages, "tools": dead.Tools})
	req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set(EpisodeHeader, dead.EpisodeID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 409 {
		t.Errorf("a request of the released episode's old id: status %d, want 409", resp.StatusCode)
	}

	// No agent at all: the next step fails within a few timeouts.
	t0 := time.Now()
	_, err = f.ext.Run(ctx, 0, w.Train[1:2])
	if err == nil || !strings.Contains(err.Error(), "rollout.external_timeout") || !strings.Contains(err.Error(), "3 of 3 episodes") {
		t.Fatalf("no agent: %v", err)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("no agent: the step failed only after %s", took)
	}
}
