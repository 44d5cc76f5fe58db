package model

import "golang.org/x/sys/cpu"

// swigluTailAVX512 (swiglu_amd64.s) is swigluTail's loop eight lanes at a
// time, n a multiple of 8.
//
//go:noescape
func swigluTailAVX512(out, gate, up, ex *float32, n int)

// negateAVX512 (swiglu_amd64.s) negates n float32 values, n a multiple
// of 16.
//
//go:noescape
func negateAVX512(dst, src *float32, n int)

// swigluVector says whether this CPU runs swigluTailAVX512.
var swigluVector = cpu.X86.HasAVX512F
