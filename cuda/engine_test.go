package cuda

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// TestGPUEngineSamplesOnDevice serves the same requests through rl.Engine
// (cmd/serve's engine) over a tiny random model on the CPU and on the GPU,
// concurrently, more requests than slots so that they queue and join
// mid-flight. On the GPU every token must be drawn on the device
// (SampleRows: one row per served token) and decode steps must replay as
// graphs. Under greedy sampling the served tokens must equal the CPU's,
// with sampler log-probability 0 on both; the reported log-probabilities
// (log-softmax of the raw logits, from the rows kept for the requests that
// ask) and the alternatives' must match the CPU's within 1e-4 absolute: a
// float32 GPU's logits differ from the CPU's by float32 summation order
// only (relErr ≤ 4·√K·2^−24, TestGPULMHead's bound), far below it.
func TestGPUEngineSamplesOnDevice(t *testing.T) {
	gpu := gpuOrSkip(t)
	raw := `{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "initializer_range": 0.2,
		"tie_word_embeddings": true}`
	cfg, err := model.ParseConfig([]byte(raw), "engine test config")
	if err != nil {
		t.Fatal(err)
	}
	var reqs []rl.GenRequest
	for i := 0; i < 5; i++ {
		p := make([]int32, 5+3*i)
		for k := range p {
			p[k] = int32((i*37 + k*11 + 3) % cfg.VocabSize)
		}
		reqs = append(reqs, rl.GenRequest{Prompt: p, Sampling: model.Greedy, Seed: uint64(i), MaxTokens: 6 + i,
			Stop: []int32{7}, Logprobs: i != 1, TopLogprobs: i % 3})
	}
	serve := func(dev model.Device) []*rl.Generation {
		t.Helper()
		m, err := model.New(cfg, dev, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		m.InitRandom(11)
		eng := rl.NewEngine(rl.NewModelPolicy(m, 3, 64), 0)
		defer eng.Close()
		out := make([]*rl.Generation, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := eng.Generate(context.Background(), r, nil)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = g
			}()
		}
		wg.Wait()
		return out
	}
	dev := &samplerCount{Device: gpu}
	graphs0, replays0 := gpu.StepGraphs()
	want, got := serve(model.NewCPU()), serve(dev)
	graphs, replays := gpu.StepGraphs()
	served, worst := 0, 0.0
	for i := range reqs {
		if want[i] == nil || got[i] == nil {
			t.Fatal("a request failed")
		}
		if !slices.Equal(got[i].IDs(), want[i].IDs()) || got[i].Finish != want[i].Finish {
			t.Fatalf("request %d: GPU served %v (%s), CPU %v (%s)", i, got[i].IDs(), got[i].Finish, want[i].IDs(), want[i].Finish)
		}
		for k, w := range want[i].Tokens {
			g := got[i].Tokens[k]
			d := math.Abs(float64(g.Logprob - w.Logprob))
			worst = max(worst, d)
			if g.SampleLogprob != 0 || w.SampleLogprob != 0 || !(d <= 1e-4) || len(g.Top) != len(w.Top) {
				t.Fatalf("request %d token %d: GPU %+v, CPU %+v", i, k, g, w)
			}
			for a := range w.Top {
				d := math.Abs(float64(g.Top[a].Logprob - w.Top[a].Logprob))
				worst = max(worst, d)
				if g.Top[a].ID != w.Top[a].ID || !(d <= 1e-4) {
					t.Fatalf("request %d token %d: GPU alternatives %v, CPU %v", i, k, g.Top, w.Top)
				}
			}
		}
		served += len(got[i].Tokens)
	}
	t.Logf("%d tokens served; %d SampleRows calls for %d rows; %d graphs, %d replays; worst |Δlogprob| %.3g",
		served, dev.calls, dev.rows, graphs-graphs0, replays-replays0, worst)
	if dev.rows != served {
		t.Errorf("%d rows sampled on the device, want one per served token (%d)", dev.rows, served)
	}
	if replays-replays0 == 0 {
		t.Errorf("no decode step replayed as a graph (%d recorded)", graphs-graphs0)
	}
}
