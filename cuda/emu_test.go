package cuda

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestGPUEmuAllocLog checks the emulator's allocation log (testdata/emu,
// R1GO_EMU_ALLOC_LOG, which ci.sh sets), the record a memory plan is
// compared with: an Alloc of 1000 float32 values appears as 4096 bytes
// (rounded up to 256) at the buffer's address, and its Free after it.
func TestGPUEmuAllocLog(t *testing.T) {
	g := gpuOrSkip(t)
	path := os.Getenv("R1GO_EMU_ALLOC_LOG")
	if path == "" || !strings.Contains(g.Name(), "emulator") {
		t.Skip("not on the emulator with R1GO_EMU_ALLOC_LOG set")
	}
	b := g.Alloc(1000)
	addr := b.(Buffer).ptr
	g.Free(b)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	wantAlloc, wantFree := fmt.Sprintf("alloc %#x 4096", addr), fmt.Sprintf("free %#x", addr)
	ia, ifr := -1, -1
	for k, l := range lines {
		switch l {
		case wantAlloc:
			ia = k
		case wantFree:
			ifr = k
		}
	}
	if ia < 0 || ifr < ia {
		t.Fatalf("allocation log %s lacks %q then %q (last lines %q)", path, wantAlloc, wantFree, lines[max(0, len(lines)-4):])
	}
}
