package cuda

import (
	"fmt"
	"unsafe"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// Frozen bf16 models. AllocBF16 (model.StoreBF16) gives a frozen model
// (the reference policy) an arena of bf16 weights and nothing else: no
// float32 arena beside it, as UseBF16 keeps for the trained policy, whose
// optimizer needs its float32 masters. Weights reach it through Upload,
// which rounds float32 values to bf16 on the host once (a bf16 checkpoint
// decodes to float32 exactly and rounds back to the same bits), or Copy
// from a float32 model, which rounds on the device.
//
// The ops that read weights take such buffers: Gemm (a bf16 b against a
// float32 a, which is rounded on its way in, as in mixed precision),
// Embedding, RMSNorm's w, AddBias's bias, LMHead's w. The
// matmuls therefore compute exactly what a registered bf16 copy would give;
// RMSNorm and AddBias, which read float32 masters under UseBF16, read the
// rounded weights here (one more bf16 rounding of a norm weight or bias,
// relative error ≤ u = 2^−8 on that op's output). Backward ops take float32
// weights only: a frozen model has no backward.

var (
	kEmbeddingForwardBF16 = kernel("embedding.cu", "embedding_forward_bf16", 256)

	kEmbeddingForwardOBF16     = kernel("embedding.cu", "embedding_forward_obf16", 256)
	kEmbeddingForwardBF16OBF16 = kernel("embedding.cu", "embedding_forward_bf16_obf16", 256)
	kRMSNormForwardWBF16       = kernel("rmsnorm.cu", "rmsnorm_forward_wbf16", 1024)
	kBiasForwardBF16           = kernel("bias.cu", "bias_forward_bf16", 256)
)

// AllocBF16 returns n zeroed bf16 values: the weights of a frozen model
// stored in bf16 (model.StoreBF16).
func (d *Device) AllocBF16(n int) model.Buffer { return d.AllocType(n, BF16) }

// weightArg unwraps a weight operand, float32 or bf16, and checks its
// length when want ≥ 0; es is its element size in bytes.
func weightArg(b model.Buffer, want int, what string) (p uintptr, bf bool, es int) {
	x, ok := b.(Buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: %s is a %T, not a CUDA buffer", what, b))
	}
	if x.dtype != F32 && x.dtype != BF16 {
		panic(fmt.Sprintf("cuda: %s holds %s, want f32 or bf16", what, x.dtype))
	}
	if want >= 0 && x.n < want {
		panic(fmt.Sprintf("cuda: %s holds %d values, the op needs %d", what, x.n, want))
	}
	return x.ptr, x.dtype == BF16, x.dtype.Size()
}

// uploadBF16 rounds src to bf16 on the host and copies it into the bf16
// buffer at p: a frozen bf16 model's weights are rounded once, at load.
func (d *Device) uploadBF16(p uintptr, src []float32) {
	h := make([]uint16, len(src))
	for i, v := range src {
		h[i] = bf16.FromFloat32(v)
	}
	d.upload(p, unsafe.Pointer(&h[0]), 2*len(h)) // staged by the driver before it returns, as Upload's
}

// downloadBF16 copies the bf16 buffer at p to the host, widening exactly.
func (d *Device) downloadBF16(dst []float32, p uintptr) {
	h := make([]uint16, len(dst))
	d.download(unsafe.Pointer(&h[0]), p, 2*len(h))
	for i, v := range h {
		dst[i] = bf16.ToFloat32(v)
	}
}

// convertCopy copies n values between a float32 and a bf16 buffer (Copy of
// a float32 model into a frozen bf16 one: CloneWith).
func (d *Device) convertCopy(dst, src Buffer) {
	k := kToBF16
	if dst.dtype == F32 {
		k = kToF32
	}
	d.launch(k, d.elementwiseGrid(dst.n), grid1(256), 0, argPtr(dst.ptr), argPtr(src.ptr), argInt64(dst.n))
	if dst.dtype == F32 {
		d.refresh(dst.ptr, dst.n)
	}
}
