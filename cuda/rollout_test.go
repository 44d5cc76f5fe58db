package cuda

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/model/tokenizer"
	"github.com/r1go/r1go/rl"
)

// samplerCount is the GPU with its SampleRows calls counted: the rollout
// must draw its tokens through the device (model.Sampler).
type samplerCount struct {
	*Device
	calls, rows int
}

func (c *samplerCount) SampleRows(tokens []int32, logprobs []float32, logits model.Buffer, V int, s model.Sampling, seeds []uint64) error {
	c.calls++
	c.rows += len(tokens)
	return c.Device.SampleRows(tokens, logprobs, logits, V, s, seeds)
}

// echoSearch is a search tool that returns its query.
type echoSearch struct{}

func (echoSearch) Name() string        { return "search" }
func (echoSearch) Description() string { return "echo the query" }
func (echoSearch) Parameters() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}`)
}
func (echoSearch) Call(ctx context.Context, args json.RawMessage) (env.Result, error) {
	return env.Result{Content: "result for " + string(args), Success: true}, nil
}

// gpuRolloutWorld is the world of the GPU rollout tests: two questions,
// a tokenizer trained on their rendered prompt (short prompts: the
// emulator's prefill attention is slow), its turn-ending tokens, and a
// model config smaller than tinyQwen.
func gpuRolloutWorld(t *testing.T) (*tokenizer.Tokenizer, []int32, *model.Config, []data.Sample) {
	t.Helper()
	samples := []data.Sample{{ID: "a", Question: "what is alpha?", Answers: []string{"gamma"}},
		{ID: "b", Question: "beta gamma delta?", Answers: []string{"alpha"}}}
	corpus := []string{"<think>find the capital</think> search query answer result for alpha beta gamma delta",
		`{"name": "search", "arguments": {"query": "alpha"}}`, "Question: what is alpha? beta gamma"}
	tok, err := tokenizer.Train(corpus, 400, tokenizer.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The rendered prompt (chiefly the tool list) is about 740 tokens with
	// this vocabulary, and the emulator's prefill attention is slow at that
	// length: train again with the prompt's text in the corpus.
	e0, err := env.New(env.DefaultConfig(), echoSearch{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, tools := e0.Episode().Reset(samples[0])
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	ids, err := tok.EncodeChat(tm, tools, true)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err = tokenizer.Train(append(corpus, tok.Decode(ids)), 1200, tokenizer.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	var stop []int32
	for _, s := range []string{"</tool_call>", "<|im_end|>"} {
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no id for %s", s)
		}
		stop = append(stop, int32(id))
	}
	// Smaller than tinyQwen, which would take minutes on the emulator.
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
		"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"max_position_embeddings": 1024, "hidden_act": "silu", "initializer_range": 0.2,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`, tok.VocabSize())
	cfg, err := model.ParseConfig([]byte(raw), "rollout test config")
	if err != nil {
		t.Fatal(err)
	}
	return tok, stop, cfg, samples
}

// TestGPURolloutSamplesOnDevice runs the same short rollout (two prompts,
// three samples each, so followers draw their first token from their
// leader's kept logits row) of a tiny random model on the CPU and on the
// GPU. On the GPU the rollout must sample through the device (SampleRows
// for every model-drawn token but the followers' first) and replay decode
// steps as graphs; with greedy decoding and with top_k=1 the trajectories
// must equal the CPU's token for token, with the same log-probabilities
// (0 for greedy; within 1e-3 for top_k=1, where they are log-softmax values).
func TestGPURolloutSamplesOnDevice(t *testing.T) {
	gpu := gpuOrSkip(t)
	tok, stop, cfg, samples := gpuRolloutWorld(t)
	const groups, n = 2, 3

	run := func(t *testing.T, dev model.Device, s model.Sampling) []*rl.Trajectory {
		t.Helper()
		m, err := model.New(cfg, dev, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(11)
		rc := rl.DefaultRolloutConfig()
		rc.N, rc.MaxTurnTokens, rc.MaxResponseTokens, rc.MaxPromptTokens = n, 10, 24, 1000
		rc.ToolConcurrency, rc.Deterministic, rc.Sampling, rc.Seed = 2, true, s, 5
		e, err := env.New(env.DefaultConfig(), echoSearch{})
		if err != nil {
			t.Fatal(err)
		}
		p := rl.NewModelPolicy(m, groups*n, 1024)
		if _, isGPU := dev.(*samplerCount); p.SamplesOnDevice() != isGPU {
			t.Fatalf("SamplesOnDevice %v on %s", p.SamplesOnDevice(), dev.Name())
		}
		r := &rl.Rollout{Cfg: &rc, Policy: p, Tok: tok, Env: e, Stop: stop}
		trajs, err := r.Run(context.Background(), 0, samples)
		if err != nil {
			t.Fatal(err)
		}
		return trajs
	}

	for _, s := range []model.Sampling{model.Greedy, {Temperature: 1, TopK: 1, TopP: 1}} {
		t.Run(fmt.Sprintf("T%v_k%d", s.Temperature, s.TopK), func(t *testing.T) {
			dev := &samplerCount{Device: gpu}
			graphs0, replays0 := gpu.StepGraphs()
			cpu := run(t, cpu.New(), s)
			got := run(t, dev, s)
			graphs, replays := gpu.StepGraphs()
			drawn, turns := 0, 0
			for i, want := range cpu {
				g := got[i]
				if !slices.Equal(g.Tokens, want.Tokens) || !slices.Equal(g.Action, want.Action) {
					t.Fatalf("trajectory %d: GPU tokens %v\nCPU tokens %v", i, g.Tokens, want.Tokens)
				}
				if g.Finish != want.Finish || g.Turns != want.Turns {
					t.Fatalf("trajectory %d: GPU finish %s turns %d, CPU %s %d", i, g.Finish, g.Turns, want.Finish, want.Turns)
				}
				for k, lp := range want.LogProb {
					if math.Abs(float64(g.LogProb[k]-lp)) > 1e-3 || (s.Temperature == 0 && g.LogProb[k] != 0) {
						t.Fatalf("trajectory %d token %d: GPU logprob %v, CPU %v", i, k, g.LogProb[k], lp)
					}
				}
				for _, a := range g.Action {
					if a {
						drawn++
					}
				}
				turns += g.Turns
			}
			t.Logf("%d tokens drawn in %d turns; %d SampleRows calls for %d rows; %d graphs, %d replays",
				drawn, turns, dev.calls, dev.rows, graphs-graphs0, replays-replays0)
			// Every drawn token but each follower's first comes from the device.
			if want := drawn - groups*(n-1); dev.rows != want {
				t.Errorf("%d rows sampled on the device, want %d", dev.rows, want)
			}
			if replays-replays0 == 0 {
				t.Errorf("no decode step replayed as a graph (%d recorded)", graphs-graphs0)
			}
		})
	}
}
