package optim

import (
	"path/filepath"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
)

// TestBF16StateSaveLoad round-trips bf16 moments through Save and Load bit
// for bit, and checks that state_dtype is validated.
func TestBF16StateSaveLoad(t *testing.T) {
	dev := cpu.New()
	const n = 1000
	p, g := dev.Alloc(n), dev.Alloc(n)
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i%7) - 3
	}
	dev.Upload(g, host)
	cfg := DefaultConfig()
	cfg.StateDType = "bfloat16"
	o, err := New(dev, p, g, cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		o.Step(1)
	}
	path := filepath.Join(t.TempDir(), "optim.safetensors")
	if err := o.Save(path); err != nil {
		t.Fatal(err)
	}
	o2, err := New(dev, p, g, cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o2.Load(path); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]model.Buffer{{o.m, o2.m}, {o.v, o2.v}} {
		a, _ := model.HostBF16(dev, pair[0])
		b, _ := model.HostBF16(dev, pair[1])
		if a == nil || b == nil {
			t.Fatal("bfloat16 state_dtype did not give bf16 moments")
		}
		nonzero := 0
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("moment %d changed in the round trip: %#x -> %#x", i, a[i], b[i])
			}
			if a[i] != 0 {
				nonzero++
			}
		}
		if nonzero == 0 {
			t.Fatal("moments are all zero after three steps")
		}
	}
	if o2.Steps() != 3 {
		t.Fatalf("step count %d after Load, want 3", o2.Steps())
	}
	// A float32 optimizer reads the bf16 file too (widened).
	o3, err := New(dev, p, g, DefaultConfig(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o3.Load(path); err != nil {
		t.Fatal(err)
	}
	cfg.StateDType = "float16"
	if _, err := New(dev, p, g, cfg, 10); err == nil {
		t.Fatal("state_dtype float16 was accepted")
	}
}
