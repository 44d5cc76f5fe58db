package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/r1go/r1go/cuda"
	"github.com/r1go/r1go/model/cpu"
)

// TestSmokeAttentionTC runs the -attention-tc section end to end at smoke
// sizes on whatever GPU there is (the CUDA emulator in CI): every forward
// shape and backward of both head configurations is launched and timed,
// and the validation against the CPU device stays within the tensor-core
// kernels' bf16 error (relative L2 ≤ 1e-2; 2-3e-3 seen on an H200).
func TestSmokeAttentionTC(t *testing.T) {
	gpu, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		if os.Getenv("R1GO_EMU_STRICT") == "1" {
			t.Fatalf("R1GO_EMU_STRICT=1 but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	l := &lab{gpu: gpu, cpu: cpu.New(), reps: 1}
	var out strings.Builder
	worst := l.tensorCoreAttention(&out, 66, 64, 1, 66)
	t.Log("\n" + out.String())
	rows := strings.Count(out.String(), "\n0.5B ") + strings.Count(out.String(), "\n1.5B ")
	want := 0
	for _, h := range tcConfigs {
		want += 2*(len(cuda.AttentionForwardShapes(h.HS))+len(cuda.AttentionBackwardShapes(h.HS))+1) + 1
	}
	if rows != want {
		t.Errorf("%d table rows, want %d", rows, want)
	}
	if !(worst > 0 && worst <= 1e-2) {
		t.Errorf("validation's largest relative L2 error %.3g, want within (0, 1e-2]", worst)
	}
}
