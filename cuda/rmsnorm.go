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

	// The residual adds fused in (AddRMSNorm, RMSNormBackwardAdd); sbf16:
	// the residual stream in bf16, dbf16: the residual gradient's bf16 copy.
	kAddRMSNorm                   = kernel("rmsnorm.cu", "add_rmsnorm_forward", 1024)
	kAddRMSNormWBF16              = kernel("rmsnorm.cu", "add_rmsnorm_forward_wbf16", 1024)
	kAddRMSNormSBF16              = kernel("rmsnorm.cu", "add_rmsnorm_forward_sbf16", 1024)
	kAddRMSNormSBF16WBF16         = kernel("rmsnorm.cu", "add_rmsnorm_forward_sbf16_wbf16", 1024)
	kRMSNormBackwardAdd           = kernel("rmsnorm.cu", "rmsnorm_backward_add", 1024)
	kRMSNormBackwardAddXBF16      = kernel("rmsnorm.cu", "rmsnorm_backward_add_xbf16", 1024)
	kRMSNormBackwardAddDBF16      = kernel("rmsnorm.cu", "rmsnorm_backward_add_dbf16", 1024)
	kRMSNormBackwardAddXBF16DBF16 = kernel("rmsnorm.cu", "rmsnorm_backward_add_xbf16_dbf16", 1024)
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

// RMSNormBackward sets dinp and accumulates dw (none for a nil dw).
func (d *Device) RMSNormBackward(dinp, dw, dout, inp, w, rstd model.Buffer, rows, C int) {
	pdx, pdw := f32(dinp, rows*C, "RMSNormBackward dinp"), f32OrNil(dw, C, "RMSNormBackward dw")
	pdy := f32(dout, rows*C, "RMSNormBackward dout")
	px, xbf, _ := weightArg(inp, rows*C, "RMSNormBackward inp")
	k := kRMSNormBackward
	if xbf {
		k = kRMSNormBackwardXBF16 // the residual stream in bf16
	}
	pw, pr := f32(w, C, "RMSNormBackward w"), f32(rstd, rows, "RMSNormBackward rstd")
	defer d.enter()()
	d.rmsnormBackward(k, false, pdx, 0, pdw, pdy, px, pw, pr, 0, rows, C)
}

// AddRMSNorm is Add(sum, a, b) then RMSNorm(out, rstd, sum, w, rows, C,
// eps) in one pass, the residual add and the norm after it: the norm reads
// the sum as stored (rounded to bf16 in a bf16 stream) without a second
// trip through memory, so the results are those of the two ops. sum, a
// and out are one type (the residual stream: float32, or bf16 under mixed
// precision), b is float32 (a branch output), w float32 or bf16 (a frozen
// model's). sum may alias a or b. It satisfies model.ResidualNorm.
func (d *Device) AddRMSNorm(sum, out, rstd, a, b, w model.Buffer, rows, C int, eps float32) {
	ps, sbf, _ := weightArg(sum, rows*C, "AddRMSNorm sum")
	po, obf, _ := weightArg(out, rows*C, "AddRMSNorm out")
	pa, abf, _ := weightArg(a, rows*C, "AddRMSNorm a")
	pb := f32(b, rows*C, "AddRMSNorm b")
	pr := f32(rstd, rows, "AddRMSNorm rstd")
	pw, wbf, _ := weightArg(w, C, "AddRMSNorm w")
	if sbf != obf || sbf != abf {
		panic(fmt.Sprintf("cuda: AddRMSNorm of a %s a into a %s sum and a %s out; the residual stream and its norm keep one type",
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

// RMSNormBackwardAdd is RMSNormBackward into a scratch then Add(dx, resid,
// scratch), the norm's input gradient added to the residual gradient, in
// one pass: dx = resid + dinp (resid nil: dx = dinp; resid may be dx),
// and dw accumulates. With dxc set it also writes dx into dxc (bf16: the
// residual gradient's copy in compute storage that mixed precision's
// matmuls read, model.MixedPrecision), rounded once from the same
// float32 values. A nil dw is skipped. It satisfies model.ResidualNorm.
func (d *Device) RMSNormBackwardAdd(dx, dxc, dw, dout, inp, w, rstd, resid model.Buffer, rows, C int) {
	pdx, pdw := f32(dx, rows*C, "RMSNormBackwardAdd dx"), f32OrNil(dw, C, "RMSNormBackwardAdd dw")
	pdy := f32(dout, rows*C, "RMSNormBackwardAdd dout")
	px, xbf, _ := weightArg(inp, rows*C, "RMSNormBackwardAdd inp")
	pw, pr := f32(w, C, "RMSNormBackwardAdd w"), f32(rstd, rows, "RMSNormBackwardAdd rstd")
	var pres, pc uintptr
	var cbf bool
	if resid != nil {
		pres = f32(resid, rows*C, "RMSNormBackwardAdd resid")
	}
	if dxc != nil {
		pc, cbf, _ = weightArg(dxc, rows*C, "RMSNormBackwardAdd dxc")
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
// over the rows, each with a row of dw in shared memory.
func (d *Device) rmsnormBackward(k kernelID, fused bool, pdx, pdxc, pdw, pdy, px, pw, pr, pres uintptr, rows, C int) {
	smem := 4 * C
	if smem > d.smemOptin {
		panic(fmt.Sprintf("cuda: RMSNormBackward keeps a row of %d floats in shared memory; the GPU allows %d bytes", C, d.smemOptin))
	}
	blocks := min(rows, 2*max(d.sms, 1))
	args := []uint64{argPtr(pdx), argPtr(pdw), argPtr(pdy), argPtr(px), argPtr(pw), argPtr(pr), argInt(rows), argInt(C)}
	if fused {
		args = []uint64{argPtr(pdx), argPtr(pdxc), argPtr(pdw), argPtr(pdy), argPtr(px), argPtr(pw), argPtr(pr), argPtr(pres), argInt(rows), argInt(C)}
	}
	d.launch(k, grid1(blocks), grid1(rmsnormThreads(C)), smem, args...)
}
