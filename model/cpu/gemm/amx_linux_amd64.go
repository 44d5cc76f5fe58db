package gemm

import (
	"fmt"
	"syscall"

	"github.com/r1go/r1go/internal/isa"
)

// Linux's arch_prctl request for an extended state component, and the
// component of the AMX tile data (XFEATURE_XTILEDATA).
const (
	archReqXcompPerm  = 0x1023
	xfeatureXtileData = 18
)

// requestAMX asks the kernel for the tile data state for the whole
// process; it fails on a CPU without AMX-BF16 or a kernel (before 5.16, or
// one that disabled AMX) that will not grant it.
func requestAMX() error {
	if !isa.X86.AMXTile || !isa.X86.AMXBF16 {
		return fmt.Errorf("no AMX-BF16 on this CPU")
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtileData, 0); errno != 0 {
		return fmt.Errorf("the kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): %v", errno)
	}
	return nil
}
