package devsel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/r1go/r1go/model/plan"
)

// TestPick prints the device line for cpu and names a bad mode.
func TestPick(t *testing.T) {
	var log strings.Builder
	dev, err := Pick("cpu", &log)
	if err != nil || dev == nil || !strings.HasPrefix(log.String(), "device: cpu") {
		t.Fatalf("Pick(cpu): %v, %v, log %q", dev, err, log.String())
	}
	if _, err := Pick("tpu", &log); err == nil || !strings.Contains(err.Error(), `"tpu"`) {
		t.Fatalf("Pick(tpu) error %v", err)
	}
}

// TestOpenPlans plans a dry run for an absent GPU from config.json alone,
// opens the CPU otherwise, and names the memory setting in its error.
func TestOpenPlans(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "model", "testdata", "config_qwen3-4b.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	var log strings.Builder
	c := Config{Device: "cuda", DeviceMemory: "1GiB", DryRun: true}
	dev, stop, err := c.Open(dir, planSettings(), &log)
	if err != nil || !stop || dev != nil {
		t.Fatalf("dry run: dev %v stop %v err %v", dev, stop, err)
	}
	for _, s := range []string{"memory plan: qwen3", "on cuda", "does NOT fit"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("plan lacks %q:\n%s", s, log.String())
		}
	}
	c = Config{Device: "cpu", DeviceMemory: "lots"}
	if _, _, err := c.Open(dir, planSettings(), &log); err == nil || !strings.HasPrefix(err.Error(), "device_memory: ") {
		t.Fatalf("bad memory size: error %v", err)
	}
}

func planSettings() plan.Settings {
	return plan.Settings{MicroBatchTokens: 4096, Keys: map[string]string{"micro_batch": "batch-tokens", "recompute": "", "slots": ""}}
}
