package model

import "golang.org/x/sys/cpu"

// sumExp32BlocksAVX512 (sample32_amd64.s) is blockSums32's loop sixteen
// lanes at a time, n and blk multiples of 16.
//
//go:noescape
func sumExp32BlocksAVX512(row *float32, n, blk int, invT, m float32, c *[12]float32, sums *float64)

// sample32Vector says whether this CPU runs sumExp32BlocksAVX512.
var sample32Vector = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ
