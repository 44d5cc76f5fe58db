package cuda

import (
	"math"
	"unsafe"

	"github.com/r1go/r1go/model"
)

var (
	kRoPE     = kernel("rope.cu", "rope_forward", 256)
	kRoPEBF16 = kernel("rope.cu", "rope_forward_bf16", 256) // q|k stored in bf16 under mixed precision
)

type ropeKey struct {
	theta float64
	HS    int
}

// ropeInvFreq is 1/theta^(2i/HS) for i < HS/2, rounded to float32 as
// Hugging Face computes it (and as the CPU device does).
func ropeInvFreq(theta float64, HS int) []float32 {
	f := make([]float32, HS/2)
	for i := range f {
		f[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(HS)))
	}
	return f
}

// RoPE rotates heads [0, nHeads) of each row of x in place; a negative
// position rotates back (the backward).
func (d *Device) RoPE(x model.Buffer, ld, off int, pos []int32, nHeads, HS int, theta float64) {
	T := len(pos)
	if T == 0 {
		return
	}
	px, xbf, _ := weightArg(x, (T-1)*ld+off+nHeads*HS, "RoPE x")
	k := kRoPE
	if xbf {
		k = kRoPEBF16
	}
	defer d.enter()()
	fb := d.ropeFreqs(theta, HS)
	n := T * nHeads * (HS / 2)
	d.launch(k, d.elementwiseGrid(n), grid1(256), 0, argPtr(px), argInt(ld), argInt(off), argPtr(d.ints("pos", pos)), argPtr(fb.ptr), argInt(T), argInt(nHeads), argInt(HS))
}

// ropeFreqs returns the device copy of ropeInvFreq(theta, HS), uploaded
// on first use and kept (the rope kernels and the fused decode attention
// read it). The caller holds the device (d.enter).
func (d *Device) ropeFreqs(theta float64, HS int) Buffer {
	key := ropeKey{theta, HS}
	fb, ok := d.invFreq[key]
	if !ok {
		v := ropeInvFreq(theta, HS)
		fb = d.alloc(len(v), F32)
		d.upload(fb.ptr, unsafe.Pointer(&v[0]), 4*len(v))
		d.invFreq[key] = fb
	}
	return fb
}
