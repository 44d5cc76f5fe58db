// Package isa decides which instruction-set extensions r1go's hand-written
// CPU kernels may use. Every kernel choice made by CPU feature (package
// gemm's micro-kernels, bf16 dot products and AMX tiles, package model's
// vector loops, the benchmarks' peak probes) reads the flags here instead
// of golang.org/x/sys/cpu, so one switch reaches all of them.
//
// The switch is the environment variable R1GO_CPU, read once when the
// program starts. It caps the tier the kernels use:
//
//	R1GO_CPU=avx512   AVX-512 and the extensions beside it (BF16, AMX)
//	R1GO_CPU=avx2     AVX2 and FMA only, as on AMD Zen 2/3 or Intel client CPUs
//	R1GO_CPU=generic  no assembly: the portable Go loops, as on arm64
//
// Unset (or "native"), every extension this CPU has is used. A cap above
// what the CPU has changes nothing: avx512 on a Zen 3 runs the avx2 tier.
// The cap also holds on top of GODEBUG's cpu.* settings, which x/sys/cpu
// applies before this package reads its flags. An unknown value is
// reported on standard error once and leaves every extension on, as
// GODEBUG does with a setting it does not know.
//
// The Go standard library decides its own code paths (math.Exp's FMA
// branch, memmove) from the runtime's CPU flags, which only GODEBUG
// changes, before main runs; the tiers here cap r1go's kernels only.
package isa

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Tier is a level of vector instructions, from the portable Go loops up.
type Tier int

const (
	Generic Tier = iota // no assembly kernels
	AVX2                // 256-bit AVX2 and FMA
	AVX512              // AVX-512 (F, and BW, DQ, VL, BF16, AMX where present)
)

// Tiers lists every tier, best first.
var Tiers = []Tier{AVX512, AVX2, Generic}

func (t Tier) String() string {
	switch t {
	case AVX512:
		return "avx512"
	case AVX2:
		return "avx2"
	case Generic:
		return "generic"
	}
	return fmt.Sprintf("isa.Tier(%d)", int(t))
}

// Parse reads a tier's name; "" and "native" mean the best tier, with
// native true.
func Parse(s string) (t Tier, native bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "native":
		return AVX512, true, nil
	case "avx512":
		return AVX512, false, nil
	case "avx2":
		return AVX2, false, nil
	case "generic":
		return Generic, false, nil
	}
	return AVX512, true, fmt.Errorf("isa: R1GO_CPU=%q is none of avx512, avx2, generic, native", s)
}

// Features are the x86-64 extensions the kernels test for. Each is true
// only when the CPU has it, the OS saves its registers, and the tier in
// force allows it.
type Features struct {
	AVX, AVX2, FMA                        bool // the avx2 tier
	AVX512F, AVX512BW, AVX512DQ, AVX512VL bool // the avx512 tier
	AVX512BF16, AMXTile, AMXBF16          bool // extensions of the avx512 tier
}

// X86 holds the features the kernels may use on this run (all false off
// amd64).
var X86 Features

// Machine is the best tier this CPU (and GODEBUG) allows, before R1GO_CPU.
var Machine Tier

// current is the tier in force; requested is R1GO_CPU as read.
var (
	current   Tier
	requested string
)

func init() {
	X86 = detect()
	Machine = X86.best()
	requested = os.Getenv("R1GO_CPU")
	want, _, err := Parse(requested)
	if err != nil {
		fmt.Fprintf(os.Stderr, "r1go: %v; using every extension this CPU has\n", err)
	}
	X86 = X86.capped(want)
	current = min(want, Machine)
}

// best is the highest tier f reaches.
func (f Features) best() Tier {
	switch {
	case f.AVX512F && f.AVX2 && f.FMA:
		return AVX512
	case f.AVX2 && f.FMA && f.AVX:
		return AVX2
	}
	return Generic
}

// capped returns f with every extension above tier t turned off.
func (f Features) capped(t Tier) Features {
	if t < AVX512 {
		f.AVX512F, f.AVX512BW, f.AVX512DQ, f.AVX512VL = false, false, false, false
		f.AVX512BF16, f.AMXTile, f.AMXBF16 = false, false, false
	}
	if t < AVX2 {
		f.AVX, f.AVX2, f.FMA = false, false, false
	}
	return f
}

// Current is the tier the kernels run at: R1GO_CPU's cap on Machine.
func Current() Tier { return current }

// Supported lists the tiers this machine runs, best first: the ones
// R1GO_CPU may usefully name.
func Supported() []Tier {
	var ts []Tier
	for _, t := range Tiers {
		if t <= Machine {
			ts = append(ts, t)
		}
	}
	return ts
}

// Describe is one line for logs and benchmark headers: the tier in force,
// why, and the architecture.
func Describe() string {
	s := fmt.Sprintf("%s/%s, CPU tier %s", runtime.GOOS, runtime.GOARCH, current)
	if requested != "" {
		s += fmt.Sprintf(" (R1GO_CPU=%s; this CPU reaches %s)", requested, Machine)
	}
	return s
}
