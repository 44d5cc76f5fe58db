package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

var (
	kRMSNormForward  = kernel("rmsnorm.cu", "rmsnorm_forward", 1024)
	kRMSNormBackward = kernel("rmsnorm.cu", "rmsnorm_backward", 1024)

	// A bf16 input: the residual stream in compute storage under mixed
	// precision (widened exactly as read; sums in float32).
	kRMSNormForwardXBF16      = kernel("rmsnorm.cu", "rmsnorm_forward_xbf16", 1024)
	kRMSNormForwardXBF16WBF16 = kernel("rmsnorm.cu", "rmsnorm_forward_xbf16_wbf16", 1024)
	kRMSNormBackwardXBF16     = kernel("rmsnorm.cu", "rmsnorm_backward_xbf16", 1024)

	// A bf16 output too: a layer's norm output (ln1, ln2) stored in bf16
	// under mixed precision, rounded once from the float32 product.
	kRMSNormForwardXBF16OBF16      = kernel("rmsnorm.cu", "rmsnorm_forward_xbf16_obf16", 1024)
	kRMSNormForwardXBF16WBF16OBF16 = kernel("rmsnorm.cu", "rmsnorm_forward_xbf16_wbf16_obf16", 1024)
)

// rmsnormThreads is the block size for a row of C values: one pass of
// whole warps over the row, at most 1024 threads.
func rmsnormThreads(C int) int { return min(1024, max(32, roundUp(min(C, 1024), 32))) }

// RMSNorm: out = inp·rsqrt(mean(inp²)+eps)·w per row; rstd[rows] saved.
// out is float32, or bf16 over a bf16 inp (mixed precision's layer norms:
// the bf16 residual stream in, the bf16 matmul input out).
func (d *Device) RMSNorm(out, rstd, inp, w model.Buffer, rows, C int, eps float32) {
	po, obf, _ := weightArg(out, rows*C, "RMSNorm out")
	pr := f32(rstd, rows, "RMSNorm rstd")
	px, xbf, _ := weightArg(inp, rows*C, "RMSNorm inp")
	pw, wbf, _ := weightArg(w, C, "RMSNorm w")
	k := kRMSNormForward
	switch {
	case obf && !xbf:
		panic("cuda: RMSNorm of a float32 inp into a bf16 out; a bf16 norm output reads the bf16 residual stream")
	case obf && wbf:
		k = kRMSNormForwardXBF16WBF16OBF16
	case obf:
		k = kRMSNormForwardXBF16OBF16
	case xbf && wbf:
		k = kRMSNormForwardXBF16WBF16
	case xbf: // the residual stream in bf16
		k = kRMSNormForwardXBF16
	case wbf:
		k = kRMSNormForwardWBF16 // a frozen bf16 model's weight (frozen.go)
	}
	defer d.enter()()
	d.launch(k, grid1(rows), grid1(rmsnormThreads(C)), 0, argPtr(po), argPtr(pr), argPtr(px), argPtr(pw), argInt(rows), argInt(C), argFloat(eps))
}

// RMSNormBackward sets dinp and accumulates dw.
func (d *Device) RMSNormBackward(dinp, dw, dout, inp, w, rstd model.Buffer, rows, C int) {
	pdx, pdw := f32(dinp, rows*C, "RMSNormBackward dinp"), f32(dw, C, "RMSNormBackward dw")
	pdy := f32(dout, rows*C, "RMSNormBackward dout")
	px, xbf, _ := weightArg(inp, rows*C, "RMSNormBackward inp")
	k := kRMSNormBackward
	if xbf {
		k = kRMSNormBackwardXBF16 // the residual stream in bf16
	}
	pw, pr := f32(w, C, "RMSNormBackward w"), f32(rstd, rows, "RMSNormBackward rstd")
	defer d.enter()()
	smem := 4 * C
	if smem > d.smemOptin {
		panic(fmt.Sprintf("cuda: RMSNormBackward keeps a row of %d floats in shared memory; the GPU allows %d bytes", C, d.smemOptin))
	}
	blocks := min(rows, 2*max(d.sms, 1))
	d.launch(k, grid1(blocks), grid1(rmsnormThreads(C)), smem, argPtr(pdx), argPtr(pdw), argPtr(pdy), argPtr(px), argPtr(pw), argPtr(pr), argInt(rows), argInt(C))
}
