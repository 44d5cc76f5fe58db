package plan

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model"
)

// TestKeepLayers: on a CUDA device with room, the plan keeps every layer's
// activations (SaveBytes raised to exactly the micro-batch's saved layers,
// the activations item says so, the total stays within KeepHeadroom); with
// too little memory, on the CPU, with recomputation asked for, or without
// a known capacity, the plan is the one given.
func TestKeepLayers(t *testing.T) {
	cfg, err := model.LoadConfig(filepath.Join("..", "testdata", "config_qwen2.5-0.5b.json"))
	if err != nil {
		t.Fatal(err)
	}
	base := Settings{Device: "cuda", Precision: "bf16-mixed", Train: true, Reference: true,
		MicroBatchTokens: 16384, RolloutSlots: 64, MaxContext: 1280, MaxPromptTokens: 512, GroupSize: 8}
	activations := func(p *Plan) Item {
		for _, it := range p.Items {
			if it.Name == "activations" {
				return it
			}
		}
		t.Fatal("no activations item")
		return Item{}
	}
	big := base
	big.Capacity = 139 * GiB
	p, err := New(cfg, big)
	if err != nil {
		t.Fatal(err)
	}
	if d := activations(p).Detail; !strings.Contains(d, "recomputation (on by itself") {
		t.Fatalf("the default plan should recompute a 16K-token micro-batch of 0.5B: %s", d)
	}
	s, q := KeepLayers(cfg, big, p)
	want := shapeOf(cfg).savedLayerBytes(16384)
	if s.SaveBytes != want {
		t.Fatalf("SaveBytes %d, want the micro-batch's saved layers %d", s.SaveBytes, want)
	}
	if d := activations(q).Detail; !strings.Contains(d, "every layer's activations saved") {
		t.Fatalf("kept plan's activations: %s", d)
	}
	if !(q.Total() > p.Total()) || float64(q.Total()) > KeepHeadroom*float64(big.Capacity) {
		t.Fatalf("kept plan %d B against %d B recomputing, capacity %d B", q.Total(), p.Total(), big.Capacity)
	}
	t.Logf("0.5B on 139 GiB: %.2f GiB keeping layers (activations %.2f GiB), %.2f GiB recomputing",
		float64(q.Total())/GiB, float64(activations(q).Bytes)/GiB, float64(p.Total())/GiB)

	for _, c := range []struct {
		what string
		edit func(*Settings)
	}{
		{"24 GiB", func(s *Settings) { s.Capacity = 24 * GiB }},
		{"the CPU", func(s *Settings) { s.Device, s.Precision, s.Capacity = "cpu", "", 139*GiB }},
		{"recomputation asked for", func(s *Settings) { s.Recompute, s.Capacity = true, 139*GiB }},
		{"an unknown capacity", func(s *Settings) {}},
	} {
		in := base
		c.edit(&in)
		p, err := New(cfg, in)
		if err != nil {
			t.Fatal(err)
		}
		if s, q := KeepLayers(cfg, in, p); s.SaveBytes != 0 || q != p {
			t.Errorf("%s: KeepLayers changed the plan (SaveBytes %d)", c.what, s.SaveBytes)
		}
	}
}
