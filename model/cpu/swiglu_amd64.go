package cpu

import "github.com/r1go/r1go/internal/isa"

// swigluTailAVX512 (swiglu_amd64.s) is swigluTail's loop eight lanes at a
// time, n a multiple of 8.
//
//go:noescape
func swigluTailAVX512(out, gate, up, ex *float32, n int)

// swiglu32AVX512 (swiglu_amd64.s) is SwiGLU32's loop of silu32 sixteen
// lanes at a time, n a multiple of 16, c the exp kernels' constants
// (expConsts), reporting whether any lane's −gate lay above expHi (to
// redo).
//
//go:noescape
func swiglu32AVX512(out, gate, up *float32, n int, c *[12]float32) (special bool)

// negateAVX512 (swiglu_amd64.s) negates n float32 values, n a multiple
// of 16.
//
//go:noescape
func negateAVX512(dst, src *float32, n int)

// swigluVector says whether this CPU runs swigluTailAVX512.
var swigluVector = isa.X86.AVX512F
