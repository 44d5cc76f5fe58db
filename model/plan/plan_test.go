package plan

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/optim"
)

// counting wraps a device and tracks the bytes its arenas hold: float32
// buffers and, through AllocAs, bfloat16 ones (frozen weights, AdamW
// moments under state_dtype bfloat16).
type counting struct {
	model.Device
	live, peak int64
}

func (c *counting) add(n int64) {
	c.live += n
	c.peak = max(c.peak, c.live)
}

func (c *counting) Alloc(n int) model.Buffer {
	c.add(int64(n) * 4)
	return c.Device.Alloc(n)
}

// AllocAs counts the CPU's bf16 kinds: frozen weights, moments, and the
// rollout copy's bf16-product weights and KV cache.
func (c *counting) AllocAs(n int, kind model.StorageKind) (model.Buffer, bool) {
	b, ok := model.AllocAs(c.Device, n, kind)
	if ok && n > 0 {
		c.add(int64(n) * 2)
	}
	return b, ok
}

func (c *counting) ProductMatrix(b model.Buffer, n, k int) (model.Buffer, bool) {
	return c.Device.(model.BF16Products).ProductMatrix(b, n, k)
}

func (c *counting) SwiGLU32(out, gu model.Buffer, rows, I int) {
	c.Device.(model.BF16Products).SwiGLU32(out, gu, rows, I)
}

func (c *counting) Free(b model.Buffer) {
	if cpu.IsBF16(b) {
		c.live -= int64(b.Len()) * 2
	} else {
		c.live -= int64(b.Len()) * 4
	}
	c.Device.Free(b)
}

func tinyConfig(t *testing.T, modelType string) *model.Config {
	t.Helper()
	raw := `{"model_type": "qwen2", "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 3,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96, "tie_word_embeddings": false}`
	if modelType == "qwen3" {
		raw = `{"model_type": "qwen3", "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 3,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 10, "vocab_size": 96, "tie_word_embeddings": true}`
	}
	cfg, err := model.ParseConfig([]byte(raw), modelType+" config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPlanMatchesCPUAllocations runs what a GRPO/PPO step allocates, as
// cmd/train sets it up (the policy with AdamW; the reference loaded frozen,
// fp32 or bf16, or under LoRA the frozen base itself; a critic; the
// rollout's KV cache and one step of prefills and decodes; a training
// forward and backward at the micro-batch; then the next step's rollout,
// which keeps the training arena) on a CPU device that counts its
// allocations, and compares the peak with the plan's total less its
// workspace (which lives outside the arenas): within 10%, with and without
// recomputation, Qwen2 and Qwen3, a bf16 reference with bf16 AdamW
// moments, LoRA adapters on a frozen base, and saved-layer bounds
// (SaveBytes) below one layer (recomputation by itself), of two layer sets
// (one layer saved, one set shared by the rest) and of every layer but not
// the logits (the automatic bound keeps the LM head's logits too), and a
// rollout that samples from a bf16 copy with bf16 products (its bf16 KV
// cache half the policy's).
func TestPlanMatchesCPUAllocations(t *testing.T) {
	type tc struct {
		mt                                     string
		recompute, refBF16, stateBF16, grouped bool
		rolloutBF16                            bool // the rollout samples from a bf16 copy, with its bf16 KV cache
		lora                                   int
		saveBytes                              int64
		saveSets                               int // saveBytes: this many layer sets of the micro-batch; -1: every layer
	}
	var cases []tc
	for _, mt := range []string{"qwen2", "qwen3"} {
		for _, recompute := range []bool{false, true} {
			cases = append(cases, tc{mt: mt, recompute: recompute})
		}
		cases = append(cases, tc{mt: mt, refBF16: true, stateBF16: true}, tc{mt: mt, lora: 4},
			tc{mt: mt, recompute: true, grouped: true}, tc{mt: mt, grouped: true}, tc{mt: mt, saveBytes: 1024},
			tc{mt: mt, saveSets: 2}, tc{mt: mt, saveSets: -1}, tc{mt: mt, rolloutBF16: true})
	}
	defer func(old int) { model.GroupBytes = old }(model.GroupBytes)
	for _, c := range cases {
		// grouped: the scoring and recomputing forwards run in groups of
		// sequences, as a long micro-batch of a large model does; the
		// plan reads the same model.GroupBytes.
		model.GroupBytes = 64 << 20
		if c.grouped {
			model.GroupBytes = 16 << 10
		}
		cfg := tinyConfig(t, c.mt)
		if sh := shapeOf(cfg); c.saveSets != 0 {
			sets := c.saveSets
			if sets < 0 {
				sets = sh.L
			}
			c.saveBytes = int64(sets) * sh.layerActs(48) * 4
			if sets >= sh.L && sh.L < 3 {
				t.Fatalf("the tiny %s config has %d layers: two sets save them all", c.mt, sh.L)
			}
		}
		name := fmt.Sprintf("%s recompute=%v refBF16=%v stateBF16=%v lora=%d grouped=%v saveBytes=%d rolloutBF16=%v", c.mt, c.recompute, c.refBF16, c.stateBF16, c.lora, c.grouped, c.saveBytes, c.rolloutBF16)
		s := Settings{Device: "cpu", Train: true, Reference: true, Critic: true, Recompute: c.recompute, SaveBytes: c.saveBytes,
			RefBF16: c.refBF16, StateBF16: c.stateBF16, LoRARank: c.lora, RolloutBF16: c.rolloutBF16,
			MicroBatchTokens: 48, RolloutSlots: 6, MaxContext: 40, MaxPromptTokens: 7, GroupSize: 3}
		p, err := New(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		dev := &counting{Device: cpu.New()}
		oc := optim.DefaultConfig()
		if c.stateBF16 {
			oc.StateDType = "bfloat16"
		}
		policy, err := model.New(cfg, dev, model.LMHeadOutput)
		if err != nil {
			t.Fatal(err)
		}
		policy.Recompute, policy.SaveBytes = c.recompute, c.saveBytes
		policy.InitRandom(1)
		var ref *model.Model
		if c.lora > 0 {
			policy.Freeze()
			if _, err := policy.AttachLoRA(model.LoRAConfig{Rank: c.lora, Alpha: 8, TargetModules: []string{"all-linear"}}, 1); err != nil {
				t.Fatal(err)
			}
			ref = policy.Base()
		} else {
			dtype := "float32"
			if c.refBF16 {
				dtype = "bfloat16"
			}
			if ref, err = policy.CloneWith(model.LoadOptions{Frozen: true, DType: dtype}); err != nil {
				t.Fatal(err)
			}
		}
		params, grads := policy.Trainable()
		if _, err := optim.New(dev, params, grads, oc, 10); err != nil {
			t.Fatal(err)
		}
		critic, _ := model.New(cfg, dev, model.ValueHeadOutput)
		critic.Recompute, critic.SaveBytes = c.recompute, c.saveBytes
		if _, err := optim.New(dev, critic.Params, critic.Grads, optim.DefaultConfig(), 10); err != nil {
			t.Fatal(err)
		}
		// One rollout step: two group leaders prefill 7-token prompts, the
		// four other slots decode one token each, on the policy or its bf16
		// copy (rl.NewTrainer's).
		sampler := policy
		if c.rolloutBF16 {
			if sampler, err = policy.CloneWith(model.LoadOptions{Frozen: true, DType: "bfloat16", BF16Products: true}); err != nil {
				t.Fatal(err)
			}
		}
		cache := sampler.NewKVCache(s.RolloutSlots, s.MaxContext)
		var chunks []model.Chunk
		for slot := 0; slot < s.RolloutSlots; slot++ {
			n := 1
			if slot%s.GroupSize == 0 {
				n = s.MaxPromptTokens
			}
			chunks = append(chunks, model.Chunk{Slot: slot, Tokens: make([]int32, n)})
		}
		if _, err := sampler.Step(cache, chunks); err != nil {
			t.Fatal(err)
		}
		b := model.Batch{Tokens: make([]int32, s.MicroBatchTokens), Seqs: []int32{0, 20, 40, 48}}
		if c.grouped {
			// The plan bounds a group by the longest sequence the context
			// allows: measure a batch that has one (its group is then the
			// whole batch, with a short one joined to it).
			b.Seqs = []int32{0, 40, 48}
		}
		if _, err := ref.Forward(b, false); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*model.Model{policy, critic} {
			if _, err := m.Forward(b, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := policy.Backward(make([]float32, 48), nil, nil); err != nil {
			t.Fatal(err)
		}
		// The next step's rollout and the reference's scoring: the policy
		// keeps its training arena (a grouped scoring arena is freed after
		// each Forward, so it peaks beside the training arenas only here).
		if _, err := sampler.Step(cache, chunks); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Forward(b, false); err != nil {
			t.Fatal(err)
		}
		withinTenPercent(t, name, p, dev.peak)
	}
}

// TestDryRunShapes plans the real config.json of Qwen2.5-0.5B, 3B and 7B
// and Qwen3-4B and checks the weights against transformers' parameter
// counts.
func TestDryRunShapes(t *testing.T) {
	for name, params := range map[string]int64{
		"config_qwen2.5-0.5b.json": 494032768, "config_qwen2.5-3b.json": 3085938688,
		"config_qwen2.5-7b.json": 7615616512, "config_qwen3-4b.json": 4022468096,
	} {
		cfg, err := model.LoadConfig(filepath.Join("..", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(cfg, Settings{Device: "cuda", Capacity: 80 << 30, Precision: "bf16-mixed", Train: true,
			MicroBatchTokens: 4096, RolloutSlots: 64, MaxContext: 4096, MaxPromptTokens: 512, GroupSize: 5})
		if err != nil {
			t.Fatal(err)
		}
		if p.Items[0].Name != "weights" || p.Items[0].Bytes != 2*params {
			t.Errorf("%s: weights %d B, want 2 × %d", name, p.Items[0].Bytes, params)
		}
	}
}

// TestAdviceMakesItFit shrinks the capacity below a plan and checks that
// the error names the largest items and that every piece of advice, applied,
// gives a plan that fits.
func TestAdviceMakesItFit(t *testing.T) {
	cfg := tinyConfig(t, "qwen2")
	s := Settings{Device: "cpu", Train: true, Reference: true, MicroBatchTokens: 4096, RolloutSlots: 60,
		MaxContext: 256, MaxPromptTokens: 64, GroupSize: 5}
	full, _ := New(cfg, s)
	for _, frac := range []float64{0.8, 0.5, 0.25} {
		s.Capacity = int64(float64(full.Total()) * frac)
		p, _ := New(cfg, s)
		err := p.Check(cfg)
		if err == nil {
			t.Fatalf("capacity %.2f of the plan: Check passed", frac)
		}
		if !strings.Contains(err.Error(), p.Largest(1)[0].Name) {
			t.Errorf("error does not name the largest item %s: %v", p.Largest(1)[0].Name, err)
		}
		adv := p.Advice(cfg)
		if len(adv) == 0 {
			t.Fatalf("capacity %.2f: no advice: %v", frac, err)
		}
		for _, a := range adv {
			u := s
			for _, kv := range strings.Fields(a) {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "trainer.recompute":
					u.Recompute = v == "true"
				case "actor.micro_batch_tokens":
					u.MicroBatchTokens = atoi(t, v)
				case "rollout.slots":
					u.RolloutSlots = atoi(t, v)
				default:
					t.Fatalf("advice names an unknown setting %q", k)
				}
			}
			if q, _ := New(cfg, u); !q.Fits() {
				t.Errorf("capacity %.2f: advice %q does not fit (%d > %d)", frac, a, q.Total(), s.Capacity)
			}
		}
	}
}

func atoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"80GiB": 80 << 30, "80GB": 80e9, "512 MiB": 512 << 20, "1024": 1024, "1.5GiB": 3 << 29} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1GiB", "eighty", "80XB", "0"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSize: no panic, and an accepted size is positive.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"80GiB", "80GB", "1.5 TiB", "12", "B", "1e400GiB", "-3MiB", "NaNGiB", "InfB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n <= 0 {
			t.Fatalf("%q gave %d", s, n)
		}
	})
}

// TestPlanPhases: offloading the reference and the AdamW moments and
// sampling from a bf16 rollout copy put those items (and, with the
// moments offloaded, the training activations) in phases of their own; the
// total is what is resident throughout plus the largest phase, and the
// items themselves do not change.
func TestPlanPhases(t *testing.T) {
	cfg := tinyConfig(t, "qwen2")
	base := Settings{Device: "cpu", Train: true, Reference: true, StateBF16: true,
		MicroBatchTokens: 48, RolloutSlots: 6, MaxContext: 40, MaxPromptTokens: 7, GroupSize: 3}
	plain, err := New(cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	s := base
	s.RefOffload, s.OptimOffload, s.RolloutBF16 = true, true, true
	off, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	bytesOf := func(p *Plan, name string) (int64, string) {
		for _, it := range p.Items {
			if it.Name == name {
				return it.Bytes, it.Phase
			}
		}
		t.Fatalf("no %q item", name)
		return 0, ""
	}
	var always int64
	phases := map[string]int64{}
	for _, it := range off.Items {
		if it.Phase == "" {
			always += it.Bytes
		} else {
			phases[it.Phase] += it.Bytes
		}
		if it.Name == "KV cache" {
			// The copy's products are bf16, and so is its cache.
			if b, _ := bytesOf(plain, it.Name); 2*it.Bytes != b {
				t.Errorf("KV cache: %d bytes for the bf16 copy's, %d for the policy's: want half", it.Bytes, b)
			}
		} else if it.Name != "rollout copy" {
			if b, _ := bytesOf(plain, it.Name); b != it.Bytes {
				t.Errorf("%s: %d bytes offloaded, %d not", it.Name, it.Bytes, b)
			}
		}
	}
	for name, want := range map[string]string{"reference policy": "reference scoring", "optimizer state": "optimizer step",
		"activations": "update", "rollout copy": "rollout", "weights": "", "gradients": ""} {
		if _, ph := bytesOf(off, name); ph != want {
			t.Errorf("%s in phase %q, want %q", name, ph, want)
		}
	}
	var most int64
	for _, b := range phases {
		most = max(most, b)
	}
	if len(phases) != 4 || off.Total() != always+most {
		t.Errorf("total %d with %d phases, want %d + %d", off.Total(), len(phases), always, most)
	}
	copyBytes, _ := bytesOf(off, "rollout copy")
	var sum int64
	for _, it := range plain.Items {
		sum += it.Bytes
	}
	if plain.Total() != sum || off.Total() >= plain.Total()+copyBytes {
		t.Errorf("plain total %d (sum %d), offloaded %d: offloading saved nothing", plain.Total(), sum, off.Total())
	}
	s.Device = "cuda"
	gpu, _ := New(cfg, s)
	if _, ph := bytesOf(gpu, "reference policy"); ph != "" {
		t.Errorf("a GPU plan put the reference in phase %q: offloading is the CPU's", ph)
	}
}

// TestEvaluationBesideTraining: a held-out evaluation between steps
// prefills every slot in one step (its questions are groups of one), and
// in a cache of its own that cache is a second KV cache; the slots the
// advice names cap the evaluation's too (cmd/train evaluates in
// rollout.slots), and the advised plan fits.
func TestEvaluationBesideTraining(t *testing.T) {
	cfg := tinyConfig(t, "qwen2")
	base := Settings{Device: "cpu", Train: true, MicroBatchTokens: 512, RolloutSlots: 60,
		MaxContext: 256, MaxPromptTokens: 64, GroupSize: 5}
	item := func(p *Plan, name string) (Item, bool) {
		for _, it := range p.Items {
			if it.Name == name {
				return it, true
			}
		}
		return Item{}, false
	}
	train, err := New(cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := base.stepTokens(), 12*64+60; got != want {
		t.Errorf("training rollout step: %d tokens, want %d", got, want)
	}
	for _, own := range []bool{false, true} {
		s := base
		s.EvalSlots, s.EvalOwnCache = 60, own
		if got, want := s.stepTokens(), 60*65; got != want {
			t.Errorf("own cache %v: step of %d tokens, want every slot prefilling: %d", own, got, want)
		}
		p, err := New(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		kv, _ := item(p, "KV cache")
		ev, ok := item(p, "evaluation KV cache")
		if ok != own || own && ev.Bytes != kv.Bytes {
			t.Errorf("own cache %v: evaluation KV cache item %v (%d B), the rollout's %d B", own, ok, ev.Bytes, kv.Bytes)
		}
		st, _ := item(p, "rollout step activations")
		st0, _ := item(train, "rollout step activations")
		if st.Bytes <= st0.Bytes {
			t.Errorf("own cache %v: step activations %d B, no more than training's %d B", own, st.Bytes, st0.Bytes)
		}
		if !own {
			continue
		}
		s.Capacity = p.Total() * 3 / 4
		q, _ := New(cfg, s)
		advised := false
		defer func() {
			if !advised {
				t.Errorf("no %s advice", s.key("slots"))
			}
		}()
		for _, a := range q.Advice(cfg) {
			k, v, _ := strings.Cut(a, "=")
			if k != s.key("slots") {
				continue
			}
			u := s
			u.RolloutSlots = atoi(t, v)
			u.EvalSlots = min(u.EvalSlots, u.RolloutSlots)
			if r, _ := New(cfg, u); !r.Fits() {
				t.Errorf("advice %q does not fit with the evaluation's slots capped (%d > %d)", a, r.Total(), s.Capacity)
			}
			// The largest that fits: one group more does not.
			u.RolloutSlots += s.GroupSize
			u.EvalSlots = min(s.EvalSlots, u.RolloutSlots)
			if r, _ := New(cfg, u); u.RolloutSlots < s.RolloutSlots && r.Fits() {
				t.Errorf("advice %q is not the most that fits: %d slots fit too", a, u.RolloutSlots)
			}
			advised = true
		}
	}
}

// TestPrefillBudget: a prefill budget bounds a rollout step's tokens, and
// with them its activations, to the budget (rl's scheduler feeds prompts
// in pieces within it); one larger than the unbounded step changes nothing.
func TestPrefillBudget(t *testing.T) {
	cfg := tinyConfig(t, "qwen2")
	s := Settings{Device: "cpu", Train: true, MicroBatchTokens: 512, RolloutSlots: 60,
		MaxContext: 256, MaxPromptTokens: 64, GroupSize: 5, EvalSlots: 60}
	free := s.stepTokens()
	for _, budget := range []int{60, 500, free, free + 1000} {
		b := s
		b.PrefillTokens = budget
		if got, want := b.stepTokens(), min(budget, free); got != want {
			t.Errorf("prefill_tokens %d: step of %d tokens, want %d", budget, got, want)
		}
		p, err := New(cfg, b)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := New(cfg, s)
		got, unbounded := stepItem(p), stepItem(q)
		if budget < free && got >= unbounded || budget >= free && got != unbounded {
			t.Errorf("prefill_tokens %d: step activations %d B against %d B without a budget", budget, got, unbounded)
		}
	}
}

// stepItem is the bytes of a plan's rollout step activations.
func stepItem(p *Plan) int64 {
	for _, it := range p.Items {
		if it.Name == "rollout step activations" {
			return it.Bytes
		}
	}
	return -1
}

// TestRewriteTokens: in step mode with a context policy that rewrites,
// a step may refill every slot with a whole window, which the step's
// activations must hold, unless a prefill budget feeds fewer tokens.
func TestRewriteTokens(t *testing.T) {
	cfg := tinyConfig(t, "qwen2")
	s := Settings{Device: "cpu", Train: true, MicroBatchTokens: 512, RolloutSlots: 16,
		MaxContext: 256, MaxPromptTokens: 64, GroupSize: 4, EvalSlots: 16}
	r := s
	r.RewriteTokens = s.MaxContext
	if got := r.stepTokens(); got != 16*256 || s.stepTokens() >= got {
		t.Errorf("step tokens %d with rewrites (want %d), %d without", got, 16*256, s.stepTokens())
	}
	p, err := New(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := New(cfg, s)
	if stepItem(p) <= stepItem(q) {
		t.Errorf("step activations %d B with rewrites, %d B without", stepItem(p), stepItem(q))
	}
	r.PrefillTokens = 300
	if got := r.stepTokens(); got != 300 {
		t.Errorf("step tokens %d with rewrites within prefill_tokens 300", got)
	}
}
