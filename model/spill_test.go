//go:build linux

package model

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSpillWeightsSameValues spills a frozen golden model (float32 and
// bf16 weights) and checks that scoring gives bit for bit the log-probs
// of before, also after its pages were dropped, and that a trained model
// and a memory filesystem are refused.
func TestSpillWeightsSameValues(t *testing.T) {
	gc := loadGoldenCase(t, "qwen2_tied")
	b := Batch{Tokens: gc.tokens, Seqs: gc.seqs}
	dir := filepath.Join("testdata", "golden", "qwen2_tied")
	for _, dtype := range []string{"float32", "bfloat16"} {
		m, err := LoadWith(dir, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true, DType: dtype})
		if err != nil {
			t.Fatal(err)
		}
		before, err := m.Forward(b, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SpillWeights(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		if !m.Spilled() || IsBF16(m.Params) != (dtype == "bfloat16") {
			t.Fatalf("%s: spilled %v, bf16 %v", dtype, m.Spilled(), IsBF16(m.Params))
		}
		for _, drop := range []bool{false, true} {
			if drop {
				m.DropWeightPages()
			}
			after, err := m.Forward(b, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range before.LogProb {
				if math.Float32bits(after.LogProb[i]) != math.Float32bits(before.LogProb[i]) {
					t.Fatalf("%s drop=%v: logprob %d is %v after spilling, %v before", dtype, drop, i, after.LogProb[i], before.LogProb[i])
				}
			}
		}
	}
	pol, err := Load(dir, NewCPU(), LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.SpillWeights(t.TempDir()); err == nil {
		t.Error("a trained model's weights were spilled")
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		ref, _ := LoadWith(dir, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true})
		if err := ref.SpillWeights("/dev/shm"); err == nil || !strings.Contains(err.Error(), "memory filesystem") {
			t.Errorf("spilling to /dev/shm: %v, want a memory-filesystem refusal", err)
		}
	}
}

// TestSpillWeightsLeaveResidentSet checks the point of spilling: a
// frozen model's 96 MiB of weights are in the process's resident file
// pages after a forward and leave them after DropWeightPages.
func TestSpillWeightsLeaveResidentSet(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "golden", "qwen2_tied", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.NumHiddenLayers = 512, 1536, 8192, 8
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDimOverride = 8, 2, 0
	m, err := NewWith(cfg, NewCPU(), LMHeadOutput, LoadOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(5)
	size := int64(4 * m.NumParams())
	if err := m.SpillWeights(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward(Batch{Tokens: []int32{1, 2, 3, 4}, Seqs: []int32{0, 4}}, false); err != nil {
		t.Fatal(err)
	}
	touched := rssFile(t)
	m.DropWeightPages()
	dropped := rssFile(t)
	if touched-dropped < size*9/10 {
		t.Fatalf("resident file pages %d MiB after scoring, %d MiB after dropping: want %d MiB of weights gone",
			touched>>20, dropped>>20, size>>20)
	}
}

// rssFile is the process's resident file-backed memory in bytes.
func rssFile(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}
