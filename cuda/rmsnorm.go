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

	// The residual adds fused in (RMSNorm's and RMSNormBackward's resid); sbf16:
	// the residual stream in bf16, dbf16: the residual gradient's bf16 copy.
	kAddRMSNorm                   = kernel("rmsnorm.cu", "add_rmsnorm_forward", 1024)
	kAddRMSNormWBF16              = kernel("rmsnorm.cu", "add_rmsnorm_forward_wbf16", 1024)
	kAddRMSNormSBF16              = kernel("rmsnorm.cu", "add_rmsnorm_forward_sbf16", 1024)
	kAddRMSNormSBF16WBF16         = kernel("rmsnorm.cu", "add_rmsnorm_forward_sbf16_wbf16", 1024)
	kRMSNormBackwardAdd           = kernel("rmsnorm.cu", "rmsnorm_backward_add", 1024)
	kRMSNormBackwardAddXBF16      = kernel("rmsnorm.cu", "rmsnorm_backward_add_xbf16", 1024)
	kRMSNormBackwardAddDBF16      = kernel("rmsnorm.cu", "rmsnorm_backward_add_dbf16", 1024)
	kRMSNormBackwardAddXBF16DBF16 = kernel("rmsnorm.cu", "rmsnorm_backward_add_xbf16_dbf16", 1024)

	kRMSNormDWSum = kernel("rmsnorm.cu", "rmsnorm_dw_sum", 256)
)

// rmsnormThreads is the block size for a row of C values: one pass of
// whole warps over the row, at most 1024 threads.
func rmsnormThreads(C int) int { return min(1024, max(32, roundUp(min(C, 1024), 32))) }

// RMSNorm: out = x·rsqrt(mean(x²)+eps)·w per row; rstd[rows] saved; x
// is inp, or with resid set inp + resid, written into sum. out is
// float32, or bf16 over a bf16 inp (mixed precision's layer norms: the
// bf16 residual stream in, the bf16 matmul input out).
//
// With resid the add and the norm run in one pass (add_rmsnorm_forward):
// the norm reads the sum as stored (rounded to bf16 in a bf16 stream)
// without a second trip through memory, so the results are those of Add
// then RMSNorm. sum, inp and out are then one type (the residual stream:
// float32, or bf16 under mixed precision), resid is float32 (a branch
// output), w float32 or bf16 (a frozen model's). sum may alias inp or resid.
func (d *Device) RMSNorm(out, sum, rstd, inp, resid, w model.Buffer, rows, C int, eps float32) {
	if resid != nil {
		d.addRMSNorm(sum, out, rstd, inp, resid, w, rows, C, eps)
		return
	}
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

// addRMSNorm is RMSNorm with a residual: sum = a + b, then its norm.
func (d *Device) addRMSNorm(sum, out, rstd, a, b, w model.Buffer, rows, C int, eps float32) {
	ps, sbf, _ := weightArg(sum, rows*C, "RMSNorm sum")
	po, obf, _ := weightArg(out, rows*C, "RMSNorm out")
	pa, abf, _ := weightArg(a, rows*C, "RMSNorm inp")
	pb := f32(b, rows*C, "RMSNorm resid")
	pr := f32(rstd, rows, "RMSNorm rstd")
	pw, wbf, _ := weightArg(w, C, "RMSNorm w")
	if sbf != obf || sbf != abf {
		panic(fmt.Sprintf("cuda: RMSNorm of a %s inp plus resid into a %s sum and a %s out; the residual stream and its norm keep one type",
			a.(Buffer).dtype, sum.(Buffer).dtype, out.(Buffer).dtype))
	}
	k := kAddRMSNorm
	switch {
	case sbf && wbf:
		k = kAddRMSNormSBF16WBF16
	case sbf:
		k = kAddRMSNormSBF16
	case wbf:
		k = kAddRMSNormWBF16
	}
	defer d.enter()()
	d.launch(k, grid1(rows), grid1(rmsnormThreads(C)), 0, argPtr(ps), argPtr(po), argPtr(pr), argPtr(pa), argPtr(pb), argPtr(pw),
		argInt(rows), argInt(C), argFloat(eps))
}

// RMSNormBackward sets dinp to the norm's input gradient, or with resid
// set to resid + that gradient (resid may be dinp: the residual gradient
// accumulates in place), and accumulates dw (none for a nil dw). With
// dinpc set it also writes dinp into dinpc (bf16: the residual
// gradient's copy in compute storage that mixed precision's matmuls read,
// model.MixedPrecision), rounded once from the same float32 values. With
// either set the add and the copy run in the backward's pass
// (rmsnorm_backward_add).
func (d *Device) RMSNormBackward(dinp, dinpc, dw, dout, inp, w, rstd, resid model.Buffer, rows, C int) {
	pdx, pdw := f32(dinp, rows*C, "RMSNormBackward dinp"), f32OrNil(dw, C, "RMSNormBackward dw")
	pdy := f32(dout, rows*C, "RMSNormBackward dout")
	px, xbf, _ := weightArg(inp, rows*C, "RMSNormBackward inp")
	pw, pr := f32(w, C, "RMSNormBackward w"), f32(rstd, rows, "RMSNormBackward rstd")
	if resid == nil && dinpc == nil {
		k := kRMSNormBackward
		if xbf {
			k = kRMSNormBackwardXBF16 // the residual stream in bf16
		}
		defer d.enter()()
		d.rmsnormBackward(k, false, pdx, 0, pdw, pdy, px, pw, pr, 0, rows, C)
		return
	}
	pres := f32OrNil(resid, rows*C, "RMSNormBackward resid")
	var pc uintptr
	var cbf bool
	if dinpc != nil {
		pc, cbf, _ = weightArg(dinpc, rows*C, "RMSNormBackward dinpc")
	}
	k := kRMSNormBackwardAdd
	switch {
	case xbf && cbf:
		k = kRMSNormBackwardAddXBF16DBF16
	case xbf:
		k = kRMSNormBackwardAddXBF16
	case cbf:
		k = kRMSNormBackwardAddDBF16
	}
	defer d.enter()()
	d.rmsnormBackward(k, true, pdx, pc, pdw, pdy, px, pw, pr, pres, rows, C)
}

// rmsnormBackward launches backward kernel k, a fused one (dxc and resid
// among its arguments, either may be 0) or a plain one: blocks striding
// over the rows, each with a row of dw in shared memory that it writes
// into a row of its own of a scratch buffer; rmsnorm_dw_sum then adds the
// rows into dw in block order, the same sum every run.
func (d *Device) rmsnormBackward(k kernelID, fused bool, pdx, pdxc, pdw, pdy, px, pw, pr, pres uintptr, rows, C int) {
	smem := 4 * C
	if smem > d.smemOptin {
		panic(fmt.Sprintf("cuda: RMSNormBackward keeps a row of %d floats in shared memory; the GPU allows %d bytes", C, d.smemOptin))
	}
	blocks := max(min(rows, 2*max(d.sms, 1)), 1)
	var part uintptr
	if pdw != 0 {
		part = d.scratchBuf("rmsnorm-dw", blocks*C, F32).ptr
	}
	args := []uint64{argPtr(pdx), argPtr(part), argPtr(pdy), argPtr(px), argPtr(pw), argPtr(pr), argInt(rows), argInt(C)}
	if fused {
		args = []uint64{argPtr(pdx), argPtr(pdxc), argPtr(part), argPtr(pdy), argPtr(px), argPtr(pw), argPtr(pr), argPtr(pres), argInt(rows), argInt(C)}
	}
	d.launch(k, grid1(blocks), grid1(rmsnormThreads(C)), smem, args...)
	if pdw != 0 {
		d.launch(kRMSNormDWSum, grid1(ceilDiv(C, 256)), grid1(256), 0, argPtr(pdw), argPtr(part), argInt(blocks), argInt(C))
	}
}
