package isa

import "golang.org/x/sys/cpu"

// detect reads x/sys/cpu, which folds the OS's XGETBV checks (the upper
// register state saved on a context switch) and GODEBUG's cpu.* settings
// into its flags.
func detect() Features {
	return Features{
		AVX: cpu.X86.HasAVX, AVX2: cpu.X86.HasAVX2, FMA: cpu.X86.HasFMA,
		AVX512F: cpu.X86.HasAVX512F, AVX512BW: cpu.X86.HasAVX512BW,
		AVX512DQ: cpu.X86.HasAVX512DQ, AVX512VL: cpu.X86.HasAVX512VL,
		AVX512BF16: cpu.X86.HasAVX512BF16,
		AMXTile:    cpu.X86.HasAMXTile, AMXBF16: cpu.X86.HasAMXBF16,
	}
}
