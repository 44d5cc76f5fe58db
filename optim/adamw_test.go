package optim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestAdamWMatchesTorch replays torch.optim.AdamW with clip_grad_norm_ and a
// warm-up + cosine LambdaLR (testdata/make_adamw.py) on the CPU device.
func TestAdamWMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "adamw_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Config struct {
			LR, Beta1, Beta2, Eps float64
			WeightDecay           float64 `json:"weight_decay"`
			GradClip              float64 `json:"grad_clip"`
			MinLRRatio            float64 `json:"min_lr_ratio"`
			WarmupSteps           int     `json:"warmup_steps"`
			TotalSteps            int     `json:"total_steps"`
			Schedule              string
		}
		Init      []float64
		Grads     [][]float64
		LRs       []float64 `json:"lrs"`
		GradNorms []float64 `json:"grad_norms"`
		Params    [][]float64
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	c := g.Config
	cfg := Config{LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay,
		GradClip: c.GradClip, WarmupSteps: c.WarmupSteps, Schedule: c.Schedule, MinLRRatio: c.MinLRRatio}
	dev := cpu.New()
	n := len(g.Init)
	params, grads := dev.Alloc(n), dev.Alloc(n)
	dev.Upload(params, f32(g.Init))
	o, err := New(dev, params, grads, cfg, c.TotalSteps)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	for s := range g.Grads {
		dev.Upload(grads, f32(g.Grads[s]))
		r := o.Step(1)
		if math.Abs(r.LR-g.LRs[s]) > 1e-12*g.LRs[s] {
			t.Fatalf("step %d: lr %v, torch %v", s, r.LR, g.LRs[s])
		}
		if math.Abs(r.GradNorm-g.GradNorms[s]) > 1e-6*g.GradNorms[s] {
			t.Fatalf("step %d: grad norm %v, torch %v", s, r.GradNorm, g.GradNorms[s])
		}
		dev.Download(got, params)
		for i := range got {
			want := g.Params[s][i]
			if math.Abs(float64(got[i])-want) > 2e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("step %d param %d: %v, torch %v", s, i, got[i], want)
			}
		}
	}
}

// TestAdamWSaveLoadResumes checks that a saved and restored optimizer
// continues exactly as the one that never stopped.
func TestAdamWSaveLoadResumes(t *testing.T) {
	dev := cpu.New()
	n := 50
	mk := func() (*AdamW, model.Buffer, model.Buffer) {
		p, g := dev.Alloc(n), dev.Alloc(n)
		init := make([]float32, n)
		for i := range init {
			init[i] = float32(math.Sin(float64(i)))
		}
		dev.Upload(p, init)
		o, err := New(dev, p, g, Config{LR: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.01, Schedule: "cosine", WarmupSteps: 2}, 8)
		if err != nil {
			t.Fatal(err)
		}
		return o, p, g
	}
	grad := func(s int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Cos(float64(i*s + 1)))
		}
		return v
	}
	a, pa, ga := mk()
	b, pb, gb := mk()
	path := filepath.Join(t.TempDir(), "optim.safetensors")
	for s := 0; s < 8; s++ {
		dev.Upload(ga, grad(s))
		a.Step(1)
		if s == 3 { // b stops here and resumes from the files
			if err := a.Save(path); err != nil {
				t.Fatal(err)
			}
			pv := make([]float32, n)
			dev.Download(pv, pa)
			dev.Upload(pb, pv)
			if err := b.Load(path); err != nil {
				t.Fatal(err)
			}
		}
		if s > 3 {
			dev.Upload(gb, grad(s))
			b.Step(1)
		}
	}
	x, y := make([]float32, n), make([]float32, n)
	dev.Download(x, pa)
	dev.Download(y, pb)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Fatalf("param %d: %v uninterrupted, %v resumed", i, x[i], y[i])
		}
	}
	// A state file for another parameter count is refused by name.
	c, _, _ := func() (*AdamW, model.Buffer, model.Buffer) {
		p, g := dev.Alloc(n+1), dev.Alloc(n+1)
		o, _ := New(dev, p, g, DefaultConfig(), 1)
		return o, p, g
	}()
	if err := c.Load(path); err == nil {
		t.Fatal("a state file for 50 parameters loaded into 51")
	}
}

func TestAdamWSkipsNonFinite(t *testing.T) {
	dev := cpu.New()
	p, g := dev.Alloc(3), dev.Alloc(3)
	dev.Upload(p, []float32{1, 2, 3})
	dev.Upload(g, []float32{1, float32(math.NaN()), 0})
	o, _ := New(dev, p, g, DefaultConfig(), 1)
	if r := o.Step(1); !r.Skipped || o.Steps() != 0 {
		t.Fatalf("NaN gradient: %+v, steps %d", r, o.Steps())
	}
	got := make([]float32, 3)
	dev.Download(got, p)
	if got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("weights changed on a skipped step: %v", got)
	}
	bad := DefaultConfig()
	bad.Schedule = "linear"
	if _, err := New(dev, p, g, bad, 1); err == nil {
		t.Fatal("unknown schedule accepted")
	}
}

func f32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// TestOffloadSameSteps runs AdamW steps with the moments in memory and
// offloaded to file mappings (float32 and bf16 moments): the weights must
// be bit for bit the same after every step, and a saved offloaded state
// must load into an offloaded optimizer.
func TestOffloadSameSteps(t *testing.T) {
	for _, dtype := range []string{"float32", "bfloat16"} {
		dev := cpu.New()
		run := func(offload bool) (*AdamW, []float32) {
			p, g := dev.Alloc(1000), dev.Alloc(1000)
			ps, _ := model.HostF32(dev, p)
			gs, _ := model.HostF32(dev, g)
			for i := range ps {
				ps[i] = float32(i%17) * 0.01
			}
			cfg := DefaultConfig()
			cfg.StateDType = dtype
			o, err := New(dev, p, g, cfg, 10)
			if err != nil {
				t.Fatal(err)
			}
			if offload {
				if err := o.Offload(t.TempDir()); err != nil {
					t.Fatal(err)
				}
				if !o.Offloaded() {
					t.Fatal("not offloaded")
				}
			}
			var trace []float32
			for step := 0; step < 4; step++ {
				for i := range gs {
					gs[i] = float32((i*7+step*3)%11) - 5
				}
				o.Step(1)
				trace = append(trace, ps...)
			}
			return o, trace
		}
		_, want := run(false)
		o, got := run(true)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: value %d is %v offloaded, %v in memory", dtype, i, got[i], want[i])
			}
		}
		path := filepath.Join(t.TempDir(), "optim.safetensors")
		if err := o.Save(path); err != nil {
			t.Fatal(err)
		}
		o2, _ := run(true)
		if err := o2.Load(path); err != nil {
			t.Fatalf("%s: load into an offloaded optimizer: %v", dtype, err)
		}
		if o2.Steps() != o.Steps() {
			t.Fatalf("%s: %d steps loaded, %d saved", dtype, o2.Steps(), o.Steps())
		}
	}
}
