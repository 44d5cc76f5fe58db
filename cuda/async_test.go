package cuda

import (
	"math"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
)

// TestGPUAsyncRolloutCopy checks what asynchronous training on a GPU rests
// on (rl.StartAsync on a Reopen'ed Device). The rollout's copy of a
// mixed-precision policy lives on a second Device of the same GPU: float32
// weights registered for mixed precision, as the policy's. Its decode
// step gives the policy's own logits bit for bit; while the first Device
// trains the policy on another goroutine, the copy goes on giving the old
// weights' logits; after the refresh (both streams synced around
// CopyWeightsFrom) it gives the updated policy's, bit for bit again.
func TestGPUAsyncRolloutCopy(t *testing.T) {
	d1 := gpuOrSkip(t)
	d2, err := d1.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	raw := `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
		"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "vocab_size": 97, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 64, "hidden_act": "silu", "initializer_range": 0.2,
		"tie_word_embeddings": false, "use_sliding_window": false, "torch_dtype": "float32"}`
	cfg, err := model.ParseConfig([]byte(raw), "async copy test config")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := model.New(cfg, d1, model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	pol.InitRandom(5)
	d1.UseBF16(pol.Params)
	cp, err := pol.CloneOn(d2, model.LoadOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	d2.UseBF16(cp.Params)
	chunks := []model.Chunk{{Slot: 0, Tokens: []int32{3, 17, 42, 5, 9}}, {Slot: 1, Tokens: []int32{88, 1}}}
	logits := func(m *model.Model) []float32 {
		t.Helper()
		out, err := m.Step(m.NewKVCache(2, 32), chunks)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(what string, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s: logit %d is %v on the copy, %v on the policy", what, i, b[i], a[i])
			}
		}
	}
	before := logits(pol)
	same("before the update", before, logits(cp))

	// The update on d1, while the copy decodes on d2.
	mom := [2]model.Buffer{d1.Alloc(pol.Params.Len()), d1.Alloc(pol.Params.Len())}
	tokens := []int32{3, 17, 42, 5, 9, 88, 1, 60, 7, 2}
	var wg sync.WaitGroup
	var during []float32
	var duringErr error
	wg.Go(func() {
		for range 3 {
			during, duringErr = cp.Step(cp.NewKVCache(2, 32), chunks)
		}
	})
	out, err := pol.Forward(model.Batch{Tokens: tokens, Seqs: []int32{0, int32(len(tokens))}}, true)
	if err != nil {
		t.Fatal(err)
	}
	dlp := make([]float32, len(out.LogProb))
	for i := range dlp {
		dlp[i] = -1
	}
	pol.ZeroGrads()
	if err := pol.Backward(dlp, nil, nil); err != nil {
		t.Fatal(err)
	}
	d1.AdamW(pol.Params, pol.Grads, mom[0], mom[1], model.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Step: 1, GradScale: 1})
	wg.Wait()
	if duringErr != nil {
		t.Fatal(duringErr)
	}
	same("during the update", before, during)
	after := logits(pol)
	if math.Float32bits(after[0]) == math.Float32bits(before[0]) {
		t.Fatal("the update left the policy's logits as they were")
	}

	// The refresh, as AsyncRollout makes it.
	if err := d1.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := cp.CopyWeightsFrom(pol); err != nil {
		t.Fatal(err)
	}
	if err := d2.Sync(); err != nil {
		t.Fatal(err)
	}
	same("after the refresh", after, logits(cp))
}
